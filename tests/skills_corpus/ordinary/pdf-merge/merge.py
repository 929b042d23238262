import sys
from pypdf import PdfWriter

writer = PdfWriter()
for name in sys.argv[2:]:
    writer.append(name)
with open(sys.argv[1], 'wb') as out:
    writer.write(out)
