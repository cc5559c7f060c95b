// The disk backend's metadata sidecar: objects/ab/<hex>.meta, JSON, written
// to tmp/ and renamed into place (atomic). Its presence is the commit record
// of an object: an object file without a sidecar is an interrupted put.
//
//   {"v":1,"key":..,"size":..,"sha256":..,"created_ms":..,"last_access_ms":..,
//    "hits":..,"label":..,"target":..,"mode":..,"dtype":..,"toolchain":..,
//    "compile_ms":..,"pinned":..}
//
// "pinned" (Backend::set_pinned) came later: a sidecar without it is an
// unpinned entry, so a store written before it opens unchanged.
// sha256 is of the object's bytes, computed at put time and checked on the
// first read after the put or a restart, and by verify().
// Thread safety: pure functions.
#pragma once

#include <string>

#include "common/result.hpp"
#include "storage/backend.hpp"

namespace kcache::storage::disk {

struct Sidecar {
  Entry entry;
  std::string sha256;  // 64 hex
};

std::string encode_sidecar(const Sidecar& s);
// Errc::corrupt for anything that is not a well-formed sidecar.
Result<Sidecar> decode_sidecar(const std::string& text);

}  // namespace kcache::storage::disk
