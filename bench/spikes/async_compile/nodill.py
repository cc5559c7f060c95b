import sys; sys.modules['dill']=None
exec(open('t_async.py').read())
