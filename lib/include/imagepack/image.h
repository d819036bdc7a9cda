// Images: everything between encoded bytes and pixels, one header per
// concept. Everything works on bytes in memory; nothing here touches the
// file system. Decoding is by content, never by file name. All functions
// are thread-safe (each thread keeps its own libjpeg-turbo handles).
//
//   pixels.h    Image (8-bit interleaved), channel conversion, orientation
//   probe.h     header facts (ProbeImage) and the JPEG structure check
//   resample.h  antialiased resampling of images and regions
//   decode.h    DecodeImage, the size policy (SizeLimit, TargetSize), EncodeJpeg
//   prepare.h   PrepareJpeg: a source image as a training JPEG
#pragma once

#include "imagepack/decode.h"
#include "imagepack/pixels.h"
#include "imagepack/prepare.h"
#include "imagepack/probe.h"
#include "imagepack/resample.h"
