import re
import sys

text = open(sys.argv[1]).read()
for line in text.splitlines():
    m = re.match(r'(#{2,3}) (.+)', line)
    if m:
        indent = '  ' * (len(m.group(1)) - 2)
        slug = re.sub(r'[^a-z0-9-]', '', m.group(2).lower().replace(' ', '-'))
        print(f'{indent}- [{m.group(2)}](#{slug})')
