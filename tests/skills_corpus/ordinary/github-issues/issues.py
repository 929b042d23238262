import sys

import requests

repo = sys.argv[1]
r = requests.get(f'https://api.github.com/repos/{repo}/issues', params={'state': 'open'}, timeout=10)
r.raise_for_status()
for issue in r.json():
    print(issue['number'], issue['title'])
