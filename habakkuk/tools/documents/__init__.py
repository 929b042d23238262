"""read_document: the text of a PDF, DOCX, XLSX, PPTX, HTML or plain text file.

One module per format (pdf, docx, xlsx, pptx, markup, plain), the format sniffed from
the bytes (sniff), the zip and XML reading the three Office formats share (ooxml), the
output budget (output), the dispatch (reader) and the tool itself (tool). Nothing here
is imported at start-up: the registry imports the tool when the toolsets are built,
and the tool imports a format's parser only when a file of that format is read.
"""
