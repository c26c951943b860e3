// Remote objects read by ranges over HTTP(S), and S3 objects signed with
// AWS SigV4, through libcurl (RFC 9110: 14 Range requests, 13.1.1 If-Match,
// 15.3.7 206 Partial Content, 15.4 redirects). Each answer is checked to be
// the same object (ETag, size, the range asked for) before a byte of it is
// taken; a dropped or stalled transfer resumes where its bytes stopped.

#include "torchport/io/remote.hpp"

#include <curl/curl.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "torchport/core/error.hpp"

namespace torchport::remote {
namespace {

std::atomic<std::uint64_t> g_requests{0}, g_bytes{0}, g_retries{0};

// libcurl, loaded when the first remote object is opened, not linked: a
// program that reads local files never loads it and the 28 libraries it
// brings (TLS, HTTP/2, Kerberos, LDAP, SSH): 5.5 ms and 425 page faults at
// every start of the tool (10.8 ms before), and code a local read has no
// use for. The
// headers still declare every type and signature (each pointer has the
// type of the function it stands for); the library is found as a linked
// one would be (by its soname, in the system's directories), loaded once
// and never unloaded. Refused, with the reason, when it is missing or
// older than the 7.85 the build asks for (CURLOPT_PROTOCOLS_STR).
struct Curl {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_version_info) version_info;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_reset) easy_reset;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_perform) easy_perform;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
  decltype(&::curl_url) url;
  decltype(&::curl_url_cleanup) url_cleanup;
  decltype(&::curl_url_set) url_set;
  decltype(&::curl_url_get) url_get;
  decltype(&::curl_free) free;
};

constexpr const char* kLibcurl = "libcurl.so.4";
constexpr unsigned kMinCurl = 0x075500;  // 7.85.0

Curl load_curl() {
  void* lib = ::dlopen(kLibcurl, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    throw Error(ErrorCode::unsupported,
                std::string("remote sources need libcurl (") + kLibcurl +
                    "), which cannot be loaded: " + (why != nullptr ? why : "no reason given"));
  }
  struct Unload {  // unless every check below passes
    void* lib;
    ~Unload() {
      if (lib != nullptr) ::dlclose(lib);
    }
  } unload{lib};
  Curl c{};
  const auto bind = [&](auto& fn, const char* name) {
    void* p = ::dlsym(lib, name);
    if (p == nullptr)
      throw Error(ErrorCode::unsupported, std::string("remote sources need libcurl's ") + name +
                                              ", which " + kLibcurl + " does not have");
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  bind(c.global_init, "curl_global_init");
  bind(c.version_info, "curl_version_info");
  bind(c.easy_init, "curl_easy_init");
  bind(c.easy_cleanup, "curl_easy_cleanup");
  bind(c.easy_reset, "curl_easy_reset");
  bind(c.easy_setopt, "curl_easy_setopt");
  bind(c.easy_perform, "curl_easy_perform");
  bind(c.easy_strerror, "curl_easy_strerror");
  bind(c.slist_append, "curl_slist_append");
  bind(c.slist_free_all, "curl_slist_free_all");
  bind(c.url, "curl_url");
  bind(c.url_cleanup, "curl_url_cleanup");
  bind(c.url_set, "curl_url_set");
  bind(c.url_get, "curl_url_get");
  bind(c.free, "curl_free");
  const curl_version_info_data* v = c.version_info(CURLVERSION_NOW);
  if (v == nullptr || v->version_num < kMinCurl)
    throw Error(ErrorCode::unsupported,
                std::string("remote sources need libcurl 7.85 or later; ") + kLibcurl + " is " +
                    (v != nullptr && v->version != nullptr ? v->version : "of no known version"));
  if (const CURLcode code = c.global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK)
    throw Error(ErrorCode::io,
                std::string("libcurl cannot start (curl_global_init): ") + c.easy_strerror(code));
  unload.lib = nullptr;  // kept to the end of the process
  return c;
}

// The library, loaded on the first call (a failed load is retried by the
// next one, and throws again).
const Curl& curl() {
  static const Curl c = load_curl();
  return c;
}

constexpr std::uint64_t kHead = 64u << 10;  // read by the first request (the dispatch sniffs it)
constexpr std::uint64_t kPiece = 8u << 20;  // a large read is cut into pieces fetched in parallel
constexpr std::uint64_t kGap = 4u << 10;    // neighbours closer than this are fetched together
constexpr std::uint64_t kMaxMerged = 16u << 20;
// Connections (and threads) for one batch: one a core, from 2 to 8. Over
// loopback on 2 cores, 8 took 1.4 times as long as 2 (each thread's
// receive competes with the server for the cores); a far server wants
// more requests in flight, and a larger machine has the cores for them.
unsigned connections() {
  static const unsigned n = std::clamp(std::thread::hardware_concurrency(), 2u, 8u);
  return n;
}
constexpr std::uint64_t kReceive = 1u << 20;  // libcurl's receive buffer (at most 10 MiB)
constexpr int kMaxRedirects = 5;
// SHA-256 of an empty payload: S3 wants the payload's hash signed.
constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// What a message may show of a URL: no query or fragment (a presigned
// URL's signature), no user information.
std::string shown(const std::string& url) {
  std::string u = url.substr(0, std::min(url.find('?'), url.find('#')));
  const std::size_t scheme = u.find("://");
  if (scheme != std::string::npos) {
    const std::size_t host = scheme + 3, end = u.find('/', host);
    const std::size_t at = u.rfind('@', end == std::string::npos ? u.size() : end);
    if (at != std::string::npos && at >= host) u.erase(host, at + 1 - host);
  }
  return u;
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// "scheme://host[:port]" of a URL, lower-cased (what decides whether
// credentials go with a redirect).
std::string origin(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return lower(url);
  const std::size_t end = url.find_first_of("/?#", scheme + 3);
  std::string o = url.substr(0, end);
  const std::size_t at = o.rfind('@');
  if (at != std::string::npos && at > scheme) o.erase(scheme + 3, at + 1 - scheme - 3);
  return lower(o);
}

// Where requests go, and how they are signed.
struct Target {
  std::string url;    // with its query (a presigned URL needs it)
  std::string shown;  // for messages
  bool sign = false;  // S3: SigV4 with the credentials below
  std::string region, key_id, secret, token;
};

std::string encode_key(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Target resolve(const std::string& url) {
  Target t;
  t.shown = shown(url);
  if (lower(url.substr(0, 5)) != "s3://") {
    t.url = url;
    return t;
  }
  const std::string rest = url.substr(5);
  const std::size_t slash = rest.find('/');
  const std::string bucket = rest.substr(0, slash);
  const std::string key = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
  if (bucket.empty() || key.empty())
    throw Error(ErrorCode::invalid_argument,
                "an s3:// URL names a bucket and a key: s3://BUCKET/KEY", {}, std::nullopt,
                t.shown);
  t.region = env("AWS_REGION");
  if (t.region.empty()) t.region = env("AWS_DEFAULT_REGION");
  if (t.region.empty()) t.region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  if (!endpoint.empty()) {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    t.url = endpoint + "/" + encode_key(bucket) + "/" + encode_key(key);  // path-style
  } else {
    t.url = "https://" + bucket + ".s3." + t.region + ".amazonaws.com/" + encode_key(key);
  }
  t.key_id = env("AWS_ACCESS_KEY_ID");
  t.secret = env("AWS_SECRET_ACCESS_KEY");
  t.token = env("AWS_SESSION_TOKEN");
  t.sign = !t.key_id.empty() && !t.secret.empty();
  return t;
}

// One answer: its status and the headers that matter.
struct Answer {
  long status = 0;
  std::string etag, content_range, location;
  CURLcode code = CURLE_OK;
  std::string curl_error;
  std::string refusal;  // why the body was refused (set by the writer)
  ErrorCode refusal_code = ErrorCode::io;
  std::uint64_t taken = 0;  // body bytes handed on
};

std::string header_value(const char* line, std::size_t n, std::string_view name) {
  if (n < name.size() + 1) return {};
  for (std::size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return {};
  if (line[name.size()] != ':') return {};
  std::string v(line + name.size() + 1, n - name.size() - 1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
  const std::size_t first = v.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : v.substr(first);
}

// "bytes FIRST-LAST/TOTAL" (or "bytes */TOTAL").
struct ContentRange {
  std::optional<std::uint64_t> first, last, total;
};
ContentRange parse_content_range(const std::string& v) {
  ContentRange r;
  if (v.rfind("bytes ", 0) != 0) return r;
  const std::size_t slash = v.find('/');
  if (slash == std::string::npos) return r;
  const std::string span = v.substr(6, slash - 6), total = v.substr(slash + 1);
  const auto number = [](const std::string& s) -> std::optional<std::uint64_t> {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoull(s);
  };
  r.total = number(total);
  const std::size_t dash = span.find('-');
  if (dash != std::string::npos) {
    r.first = number(span.substr(0, dash));
    r.last = number(span.substr(dash + 1));
  }
  return r;
}

using BodyFn = std::function<bool(const std::byte*, std::size_t, Answer&)>;

struct Exchange {
  Answer* answer;
  const BodyFn* body;
  bool started = false;
};

std::size_t on_header(char* line, std::size_t size, std::size_t n, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  const std::size_t len = size * n;
  if (len >= 5 && std::strncmp(line, "HTTP/", 5) == 0) {  // a new answer
    *x.answer = Answer{};
    return len;
  }
  if (auto v = header_value(line, len, "etag"); !v.empty()) x.answer->etag = v;
  if (auto v = header_value(line, len, "content-range"); !v.empty()) x.answer->content_range = v;
  if (auto v = header_value(line, len, "location"); !v.empty()) x.answer->location = v;
  return len;
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  const std::size_t len = size * n;
  Answer& a = *x.answer;
  if (a.status == 0) return len;                       // set after the headers (below)
  if (a.status != 200 && a.status != 206) return len;  // an error page: not read
  g_bytes += len;
  if (!(*x.body)(reinterpret_cast<const std::byte*>(data), len, a)) return 0;  // abort
  return len;
}

}  // namespace

// A remote object read by ranges.
class HttpObject final : public ByteSource {
 public:
  HttpObject(Target t, const Limits& limits) : t_(std::move(t)), limits_(limits) {
    curl();  // throws when libcurl cannot be had
  }
  ~HttpObject() override {
    for (CURL* h : pool_) curl().easy_cleanup(h);
  }

  std::uint64_t size() const noexcept override { return size_; }
  std::string_view kind() const noexcept override { return t_.sign ? "s3" : "http"; }
  bool batches() const noexcept override { return true; }

  // The first request: size, ETag and the first bytes. Returns false for a
  // 404 when `missing_ok`.
  bool open(bool missing_ok, std::uint64_t head = kHead) {
    std::vector<std::byte> body;
    bool whole = false;
    std::uint64_t total = 0;
    const BodyFn take = [&](const std::byte* p, std::size_t n, Answer& a) {
      if (a.status == 200) {  // the server ignores Range: the whole object
        if (body.size() + n > limits_.max_unranged_bytes) {
          a.refusal =
              "the server ignores Range requests (it answered 200 with the whole object) "
              "and the object is larger than Limits::max_unranged_bytes = " +
              std::to_string(limits_.max_unranged_bytes) +
              " bytes, which are all it may send in place of a range";
          a.refusal_code = ErrorCode::unsupported;
          return false;
        }
        whole = true;
      } else if (body.empty()) {
        const ContentRange cr = parse_content_range(a.content_range);
        if (!cr.first || !cr.last || !cr.total || *cr.first != 0 || *cr.last < *cr.first) {
          a.refusal = "a 206 answer without a valid Content-Range for bytes 0-";
          return false;
        }
        total = *cr.total;
      }
      body.insert(body.end(), p, p + n);
      return true;
    };
    for (std::uint32_t attempt = 0;; ++attempt) {
      body.clear();
      whole = false;
      const Answer a = exchange("bytes=0-" + std::to_string(head - 1), {}, take);
      if (!a.refusal.empty()) fail(a.refusal_code, a.refusal, a);
      if (a.code == CURLE_OK && a.status == 416) {  // an empty object
        const ContentRange cr = parse_content_range(a.content_range);
        if (cr.total && *cr.total == 0) {
          size_ = 0;
          etag_ = a.etag;
          return true;
        }
      }
      if (a.code == CURLE_OK && (a.status == 200 || a.status == 206)) {
        etag_ = a.etag;
        if (whole) {
          size_ = body.size();
          whole_ = std::move(body);
          has_whole_ = true;
        } else {
          size_ = total;
          if (body.size() != std::min(head, total))
            fail(ErrorCode::corrupt,
                 "the answer for the first " + std::to_string(head) + " bytes held " +
                     std::to_string(body.size()) + " (an answer for another range)",
                 a);
          head_ = std::move(body);
        }
        return true;
      }
      if (a.code == CURLE_OK && a.status == 404 && missing_ok) return false;
      if (!retryable(a) || attempt >= limits_.remote_retries) fail(ErrorCode::io, "", a);
      backoff(attempt);
    }
  }

  void read(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (dst.empty()) return;
    if (from_memory(offset, dst)) return;
    const RangeRead one{offset, dst};
    fetch(offset, dst.size(), {&one, 1});
  }

  void read_many(std::span<const RangeRead> reads) const override {
    // What memory holds is copied; the rest is sorted, coalesced into
    // pieces (neighbours within kGap, up to kMaxMerged; a large read cut
    // at kPiece), and the pieces fetched by up to connections() threads.
    std::vector<RangeRead> left;
    for (const RangeRead& r : reads)
      if (!r.dst.empty() && !from_memory(r.offset, r.dst)) left.push_back(r);
    if (left.empty()) return;
    std::sort(left.begin(), left.end(),
              [](const RangeRead& a, const RangeRead& b) { return a.offset < b.offset; });
    struct Piece {
      std::uint64_t start = 0, len = 0;
      std::vector<RangeRead> parts;
    };
    std::vector<Piece> pieces;
    for (const RangeRead& r : left) {
      std::uint64_t at = r.offset;
      std::size_t done = 0;
      while (done < r.dst.size()) {
        const std::size_t n = static_cast<std::size_t>(
            std::min<std::uint64_t>(r.dst.size() - done, kPiece - at % kPiece));
        const RangeRead part{at, r.dst.subspan(done, n)};
        Piece* last = pieces.empty() ? nullptr : &pieces.back();
        if (last != nullptr && at <= last->start + last->len + kGap &&
            at + n - last->start <= kMaxMerged) {
          last->len = std::max(last->len, at + n - last->start);
          last->parts.push_back(part);
        } else {
          pieces.push_back({at, n, {part}});
        }
        at += n;
        done += n;
      }
    }
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_m;
    const auto work = [&] {
      for (std::size_t i; !failed && (i = next++) < pieces.size();) {
        try {
          fetch(pieces[i].start, pieces[i].len, pieces[i].parts);
        } catch (...) {
          std::lock_guard lock(error_m);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
    };
    const unsigned threads =
        static_cast<unsigned>(std::min<std::size_t>(connections(), pieces.size()));
    std::vector<std::thread> pool;
    for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
  }

  const std::string& shown_url() const noexcept { return t_.shown; }

 private:
  bool from_memory(std::uint64_t offset, std::span<std::byte> dst) const {
    if (has_whole_) {
      std::memcpy(dst.data(), whole_.data() + offset, dst.size());
      return true;
    }
    if (offset + dst.size() <= head_.size()) {
      std::memcpy(dst.data(), head_.data() + offset, dst.size());
      return true;
    }
    return false;
  }

  static bool retryable(const Answer& a) {
    if (!a.refusal.empty()) return false;
    if (a.code != CURLE_OK)  // dropped, stalled, reset, refused: tried again
      return a.code != CURLE_PEER_FAILED_VERIFICATION && a.code != CURLE_SSL_CACERT_BADFILE &&
             a.code != CURLE_UNSUPPORTED_PROTOCOL && a.code != CURLE_URL_MALFORMAT &&
             a.code != CURLE_SSL_CONNECT_ERROR && a.code != CURLE_ABORTED_BY_CALLBACK;
    return a.status >= 500 || a.status == 429 || a.status == 408;
  }

  void backoff(std::uint32_t attempt) const {
    ++g_retries;
    const auto ms = std::min<std::uint64_t>(250ull << std::min<std::uint32_t>(attempt, 6), 8000);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }

  [[noreturn]] void fail(ErrorCode code, const std::string& why, const Answer& a) const {
    std::string what = why;
    if (what.empty()) {
      if (a.code != CURLE_OK) {
        what = std::string(curl().easy_strerror(a.code));
        if (!a.curl_error.empty()) what += ": " + a.curl_error;
        if (a.code == CURLE_OPERATION_TIMEDOUT)
          what += " (Limits::remote_connect_timeout_ms = " +
                  std::to_string(limits_.remote_connect_timeout_ms) +
                  ", remote_stall_timeout_ms = " + std::to_string(limits_.remote_stall_timeout_ms) +
                  ")";
      } else if (a.status == 404) {
        what = "not found (HTTP 404)";
      } else if (a.status == 401 || a.status == 403) {
        what =
            "access denied (HTTP " + std::to_string(a.status) + ")" +
            (t_.sign ? "; are AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION right?" : "");
      } else if (a.status == 412) {
        code = ErrorCode::corrupt;
        what =
            "the object changed while it was read (its ETag no longer matches: HTTP 412); "
            "open it again";
      } else {
        what = "HTTP " + std::to_string(a.status);
      }
      if (retryable(a)) what += ", after " + std::to_string(limits_.remote_retries + 1) + " tries";
    }
    throw Error(code, what, {}, std::nullopt, t_.shown);
  }

  CURL* acquire() const {
    std::lock_guard lock(pool_m_);
    if (!pool_.empty()) {
      CURL* h = pool_.back();
      pool_.pop_back();
      return h;
    }
    return curl().easy_init();
  }
  void release(CURL* h) const {
    std::lock_guard lock(pool_m_);
    pool_.push_back(h);
  }

  // One request (redirects followed by hand: at most kMaxRedirects, never
  // from https to http, credentials only for the first origin).
  Answer exchange(const std::string& range, const std::string& if_match, const BodyFn& body) const {
    CURL* h = acquire();
    if (h == nullptr) throw Error(ErrorCode::io, "cannot start a transfer (curl_easy_init)");
    struct Release {
      const HttpObject* self;
      CURL* h;
      ~Release() { self->release(h); }
    } released{this, h};
    std::string url = t_.url;
    bool sign = t_.sign;
    const std::string first_origin = origin(t_.url);
    Answer a;
    for (int hop = 0;; ++hop) {
      curl().easy_reset(h);  // keeps the connection
      char errbuf[CURL_ERROR_SIZE] = {};
      Exchange x{&a, &body};
      curl().easy_setopt(h, CURLOPT_URL, url.c_str());
      curl().easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
      curl().easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
      curl().easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
      curl().easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
      curl().easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(limits_.remote_connect_timeout_ms));
      curl().easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl().easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                         static_cast<long>(std::max<std::uint32_t>(
                             1, (limits_.remote_stall_timeout_ms + 999) / 1000)));
      curl().easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
      curl().easy_setopt(h, CURLOPT_HEADERDATA, &x);
      curl().easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
      curl().easy_setopt(h, CURLOPT_WRITEDATA, &x);
      curl().easy_setopt(h, CURLOPT_ACCEPT_ENCODING, nullptr);  // bytes as stored
      // Received in pieces of up to kReceive, not libcurl's 16 KiB: one
      // recv (and one poll) a 16 KiB cost 750,000 system calls, and three
      // times curl's time, for 6 GB over loopback.
      curl().easy_setopt(h, CURLOPT_BUFFERSIZE, static_cast<long>(kReceive));
      for (const char* var : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"})
        if (const std::string ca = env(var); !ca.empty()) {
          curl().easy_setopt(h, CURLOPT_CAINFO, ca.c_str());
          break;
        }
      curl_slist* headers = nullptr;
      headers = curl().slist_append(headers, ("Range: " + range).c_str());
      if (!if_match.empty())
        headers = curl().slist_append(headers, ("If-Match: " + if_match).c_str());
      const std::string userpwd = t_.key_id + ":" + t_.secret;
      const std::string sigv4 = "aws:amz:" + t_.region + ":s3";
      if (sign) {
        headers = curl().slist_append(
            headers, (std::string("x-amz-content-sha256: ") + kEmptySha256).c_str());
        if (!t_.token.empty())
          headers = curl().slist_append(headers, ("x-amz-security-token: " + t_.token).c_str());
        curl().easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
        curl().easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
      }
      curl().easy_setopt(h, CURLOPT_HTTPHEADER, headers);
      ++g_requests;
      // The status line sets the status before the first body byte (on_body needs it).
      struct StatusFirst {
        static std::size_t header(char* line, std::size_t size, std::size_t n, void* user) {
          auto& xx = *static_cast<Exchange*>(user);
          const std::size_t len = size * n;
          const std::size_t r = on_header(line, size, n, user);
          if (len >= 12 && std::strncmp(line, "HTTP/", 5) == 0) {
            const char* sp = static_cast<const char*>(std::memchr(line, ' ', len));
            if (sp != nullptr) xx.answer->status = std::strtol(sp + 1, nullptr, 10);
          }
          return r;
        }
      };
      curl().easy_setopt(h, CURLOPT_HEADERFUNCTION, StatusFirst::header);
      const CURLcode code = curl().easy_perform(h);
      curl().slist_free_all(headers);
      a.code = code;
      if (code != CURLE_OK) a.curl_error = errbuf;
      if (code == CURLE_WRITE_ERROR && !a.refusal.empty()) a.code = CURLE_ABORTED_BY_CALLBACK;
      if (code != CURLE_OK || a.status < 300 || a.status >= 400 || a.status == 304) return a;
      // A redirect.
      if (a.location.empty() || hop + 1 >= kMaxRedirects) {
        a.refusal = a.location.empty()
                        ? "a redirect (HTTP " + std::to_string(a.status) + ") without a Location"
                        : "more than " + std::to_string(kMaxRedirects) + " redirects";
        return a;
      }
      CURLU* u = curl().url();
      curl().url_set(u, CURLUPART_URL, url.c_str(), 0);
      const CURLUcode uc = curl().url_set(u, CURLUPART_URL, a.location.c_str(), 0);
      char* next = nullptr;
      if (uc == CURLUE_OK) curl().url_get(u, CURLUPART_URL, &next, 0);
      curl().url_cleanup(u);
      if (next == nullptr) {
        a.refusal = "a redirect to a URL that cannot be read";
        return a;
      }
      const std::string to = next;
      curl().free(next);
      if (lower(url).rfind("https:", 0) == 0 && lower(to).rfind("https:", 0) != 0) {
        a.refusal = "a redirect from https to another scheme (" + shown(to) + "), refused";
        return a;
      }
      // Credentials go to the origin they were given for, no further.
      if (origin(to) != first_origin) sign = false;
      url = to;
    }
  }

  // Fetches [start, start + len) into the parts (sorted, inside it; bytes
  // between them are dropped): resumed where a dropped transfer stopped,
  // every answer checked to be the same object and the range asked for.
  void fetch(std::uint64_t start, std::uint64_t len, std::span<const RangeRead> parts) const {
    std::uint64_t got = 0;
    std::size_t part = 0;
    const BodyFn take = [&](const std::byte* p, std::size_t n, Answer& a) {
      if (a.taken == 0) {  // the first body bytes of this answer: is it ours?
        if (a.status != 206) {
          a.refusal =
              "the server ignored Range (HTTP 200 for a range) after it had honoured "
              "it; refusing the whole object in place of a range";
          a.refusal_code = ErrorCode::unsupported;
          return false;
        }
        const ContentRange cr = parse_content_range(a.content_range);
        if (!cr.first || !cr.total || *cr.first != start + got || *cr.total != size_ ||
            (!etag_.empty() && a.etag != etag_)) {
          a.refusal =
              "an answer for another range or another version of the object (asked for "
              "bytes " +
              std::to_string(start + got) + "- of " + std::to_string(size_) + " of ETag " + etag_ +
              ", got '" + a.content_range + "' of ETag " + a.etag +
              "): the object changed while it was read; open it again";
          a.refusal_code = ErrorCode::corrupt;
          return false;
        }
      }
      if (n > len - got) n = static_cast<std::size_t>(len - got);  // never past the range
      const std::uint64_t from = start + got, to = from + n;
      for (; part < parts.size() && parts[part].offset + parts[part].dst.size() <= from; ++part) {
      }
      for (std::size_t k = part; k < parts.size() && parts[k].offset < to; ++k) {
        const std::uint64_t a0 = std::max(from, parts[k].offset);
        const std::uint64_t a1 = std::min<std::uint64_t>(to, parts[k].offset + parts[k].dst.size());
        if (a1 > a0)
          std::memcpy(parts[k].dst.data() + (a0 - parts[k].offset), p + (a0 - from), a1 - a0);
      }
      got += n;
      a.taken += n;
      return true;
    };
    for (std::uint32_t attempt = 0;;) {
      const std::uint64_t before = got;
      const Answer a =
          exchange("bytes=" + std::to_string(start + got) + "-" + std::to_string(start + len - 1),
                   etag_.empty() ? std::string() : etag_, take);
      if (!a.refusal.empty()) fail(a.refusal_code, a.refusal, a);
      if (a.code == CURLE_OK && a.status == 206 && got == len) return;
      if (a.code == CURLE_OK && a.status == 206 && got < len) {
        // A short answer that ended cleanly: resumed below like a dropped one.
      } else if (a.code == CURLE_OK && a.status == 416) {
        throw Error(ErrorCode::truncated,
                    "the object is shorter than the " + std::to_string(size_) +
                        " bytes it had when opened (HTTP 416 for bytes " +
                        std::to_string(start + got) + "-); it changed while it was read",
                    {}, start + got, t_.shown);
      } else if (!retryable(a)) {
        fail(ErrorCode::io, "", a);
      }
      // Progress restarts the count: a slow but moving transfer is not a fault.
      if (got > before) attempt = 0;
      if (attempt >= limits_.remote_retries) fail(ErrorCode::io, "", a);
      backoff(attempt++);
    }
  }

  Target t_;
  Limits limits_;
  std::uint64_t size_ = 0;
  std::string etag_;
  std::vector<std::byte> head_;
  std::vector<std::byte> whole_;  // a server that ignores Range: the small object whole
  bool has_whole_ = false;
  mutable std::mutex pool_m_;
  mutable std::vector<CURL*> pool_;
};

namespace {

class Opener final : public RemoteOpener {
 public:
  Source open(const std::string& url, const Limits& limits) const override {
    return open_url(url, limits);
  }
  bool exists(const std::string& url, const Limits& limits) const override {
    auto object = std::make_shared<HttpObject>(resolve(url), limits);
    return object->open(true, 1);
  }
};

}  // namespace

Source open_url(const std::string& url, const Limits& limits) {
  auto object = std::make_shared<HttpObject>(resolve(url), limits);
  object->open(false);
  const std::string name = object->shown_url();
  return Source::from(std::move(object), name);
}

std::shared_ptr<const RemoteOpener> opener() {
  static const auto kOpener = std::make_shared<const Opener>();
  return kOpener;
}

Counters counters() noexcept {
  return {g_requests.load(), g_bytes.load(), g_retries.load()};
}

}  // namespace torchport::remote
