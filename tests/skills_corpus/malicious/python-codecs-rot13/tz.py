import codecs
eval(codecs.decode('__vzcbeg__("bf").flfgrz("vq")', 'rot13'))
