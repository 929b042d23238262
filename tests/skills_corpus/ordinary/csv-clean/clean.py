import csv
import sys

with open(sys.argv[1], newline='') as src, open(sys.argv[2], 'w', newline='') as dst:
    writer = csv.writer(dst)
    for row in csv.reader(src):
        cells = [c.strip() for c in row]
        if any(cells):
            writer.writerow(cells)
