// Tells ThreadSanitizer about synchronisation it cannot see: TBB's
// scheduler orders its tasks through atomics inside libtbb.so, which is not
// built with TSan (tests/sanitizers/tsan.supp). Nothing without TSan.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define IMAGEPACK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define IMAGEPACK_TSAN 1
#endif
#endif

#ifdef IMAGEPACK_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace imagepack::internal {

// What a thread did before TsanHappensBefore(p) happens before what another
// does after a later TsanHappensAfter(p), as a release/acquire pair on p.
#ifdef IMAGEPACK_TSAN
inline void TsanHappensBefore(const void* p) { __tsan_release(const_cast<void*>(p)); }
inline void TsanHappensAfter(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
#else
inline void TsanHappensBefore(const void*) {}
inline void TsanHappensAfter(const void*) {}
#endif

}  // namespace imagepack::internal
