import re
import sys
from datetime import timedelta

path, delta = sys.argv[1], timedelta(seconds=float(sys.argv[2]))
stamp = re.compile(r'(\d\d):(\d\d):(\d\d),(\d{3})')


def shift(m):
    t = timedelta(hours=int(m[1]), minutes=int(m[2]), seconds=int(m[3]), milliseconds=int(m[4])) + delta
    ms = int(t.total_seconds() * 1000)
    return f'{ms // 3600000:02}:{ms // 60000 % 60:02}:{ms // 1000 % 60:02},{ms % 1000:03}'


print(stamp.sub(shift, open(path).read()))
