#pragma once
/// \file
/// `torchport::remote`: checkpoints read from HTTP(S) servers and S3-compatible
/// object storage by ranges, through libcurl (the `torchport::remote`
/// component; docs/remote.md).
///
///     torchport::OpenOptions o;
///     o.remote = torchport::remote::opener();
///     auto cat = torchport::open("s3://bucket/llama/model.safetensors.index.json", o);

#include <cstdint>
#include <memory>
#include <string>

#include "torchport/core/limits.hpp"
#include "torchport/io/source.hpp"

namespace torchport::remote {

/// Opens `url` (`https://`, `http://`, or `s3://bucket/key`) as a ranged
/// `Source`: one request learns its size and ETag (and reads its first
/// 64 KiB, which the readers' dispatch looks at); every other range is read
/// when a reader or a tensor asks for it, neighbours coalesced and several
/// requests in parallel over kept-alive connections (`read_many`).
///
/// Every response must be the same object: a range request carries
/// `If-Match` with the ETag of the first answer, and an answer with another
/// ETag, size or range is refused (the object changed), never mixed in.
/// A transfer that drops or stalls (`Limits::remote_stall_timeout_ms`) is
/// resumed where its bytes stopped; 5xx and 429 answers are retried with
/// backoff, `Limits::remote_retries` times. A server that ignores Range is
/// taken only for an object of at most `Limits::max_unranged_bytes`.
/// Redirects are followed (at most 5; never from https to http) and carry
/// no credentials to another host. TLS certificates are verified (the
/// system's CA store, or `CURL_CA_BUNDLE` / `SSL_CERT_FILE`).
///
/// `s3://bucket/key` is signed with AWS Signature Version 4 from
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`
/// (optional) and `AWS_REGION` (or `AWS_DEFAULT_REGION`, else us-east-1),
/// against `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (path-style: the
/// endpoint, the bucket, the key) or AWS's own virtual-hosted endpoint.
/// Without credentials the request goes unsigned (a public bucket).
/// No message ever shows a credential, a URL's query (a presigned URL's
/// signature) or its user information.
///
/// \throws Error(io) naming the URL and what failed (HTTP status, curl's
/// error), Error(unsupported) for a server that ignores Range past the limit.
Source open_url(const std::string& url, const Limits& limits = {});

/// The opener for `OpenOptions::remote`: `open_url`, and `exists` by a
/// request for the first byte.
std::shared_ptr<const RemoteOpener> opener();

/// What the remote sources of this process have done (for tests and
/// benchmarks): requests sent and body bytes received.
struct Counters {
  std::uint64_t requests = 0;  ///< HTTP requests sent, retries included
  std::uint64_t bytes = 0;     ///< response body bytes received
  std::uint64_t retries = 0;   ///< times a request was tried again after a failure
};
/// The counters so far, summed over every remote source of the process.
Counters counters() noexcept;

}  // namespace torchport::remote
