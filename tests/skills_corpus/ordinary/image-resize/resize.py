import sys
from pathlib import Path

from PIL import Image

folder, width = Path(sys.argv[1]), int(sys.argv[2])
for p in folder.glob('*.jpg'):
    img = Image.open(p)
    img.thumbnail((width, width))
    img.save(p.with_name(p.stem + '-web.jpg'))
