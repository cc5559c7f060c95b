// KCACHE_CLIENT_API marks the client's public classes and functions.
//
// The project builds with -fvisibility=hidden so that the Boost and OpenSSL
// code linked into libkcache never interposes on (or is interposed by) the
// copies torch brings into the same process. Only what carries this macro is
// visible outside the shared object the client is linked into.
#pragma once

#if defined(_WIN32)
#define KCACHE_CLIENT_API
#else
#define KCACHE_CLIENT_API __attribute__((visibility("default")))
#endif
