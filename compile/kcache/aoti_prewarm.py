"""`python -m kcache.aoti_prewarm`: the command's name; the tool is kcache.tools.aoti_prewarm."""

import sys

from kcache.tools import aoti_prewarm as _tool

if __name__ == "__main__":
    sys.exit(_tool.main())
sys.modules[__name__] = _tool
