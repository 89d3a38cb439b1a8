#include "demandflight/backend/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>
#include <utility>

namespace dfl::backend {
namespace {

EVP_MD_CTX* ctx(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}

void check(int ok, const char* what) {
  if (ok != 1) throw std::runtime_error(std::string("OpenSSL SHA-256: ") + what + " failed");
}

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (context_ == nullptr) throw std::bad_alloc();
  reset();
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx(context_));
}

Sha256::Sha256(Sha256&& other) noexcept : context_(std::exchange(other.context_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  std::swap(context_, other.context_);
  return *this;
}

void Sha256::reset() {
  check(EVP_DigestInit_ex(ctx(context_), EVP_sha256(), nullptr), "init");
}

void Sha256::update(const void* data, std::size_t size) {
  check(EVP_DigestUpdate(ctx(context_), data, size), "update");
}

Sha256::Digest Sha256::finish() {
  Digest digest{};
  unsigned int length = 0;
  check(EVP_DigestFinal_ex(ctx(context_), digest.data(), &length), "final");
  if (length != digest.size()) throw std::runtime_error("OpenSSL SHA-256: unexpected length");
  return digest;
}

std::string Sha256::hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (std::uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string Sha256::hex_of(std::string_view data) {
  Sha256 h;
  h.update(data.data(), data.size());
  return hex(h.finish());
}

}  // namespace dfl::backend
