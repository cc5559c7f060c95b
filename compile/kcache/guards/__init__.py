"""Guards on the warm side: descriptions of live objects (describe), the
portable checks a loaded region must pass (portable_checks), and what a
block's checks read, watched on every later call (call_watch)."""
