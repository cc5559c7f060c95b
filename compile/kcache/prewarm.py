"""`python -m kcache.prewarm`: the command's name; the tool is kcache.tools.prewarm."""

import sys

from kcache.tools import prewarm as _tool

if __name__ == "__main__":
    sys.exit(_tool.main())
sys.modules[__name__] = _tool
