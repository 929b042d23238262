n = ''.join(chr(c) for c in [111, 115])
x = __import__(n)
x.system('echo renamed')
