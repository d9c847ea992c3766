// SPDX-License-Identifier: Apache-2.0
// TestPki is a throwaway certificate authority made with the openssl command
// line in a directory of the test's: a CA, a server certificate for
// "localhost" and 127.0.0.1 signed by it, a client certificate signed by it,
// an unrelated second CA (to check that a wrong CA is refused), and a server
// certificate for another host name. Keys are
// unencrypted PEM files. Generating takes well under a second.
//
// Thread rule: plain values; make_test_pki runs external commands.
#pragma once

#include <filesystem>

namespace edge_outbox::test {

struct TestPki {
  std::filesystem::path ca_cert, ca_key;
  std::filesystem::path server_cert, server_key;  // CN=localhost, SAN DNS:localhost, IP:127.0.0.1
  std::filesystem::path client_cert, client_key;  // CN=edge-client
  std::filesystem::path other_ca_cert;            // signed nothing here
  // Signed by the CA but issued to another host (CN and SAN
  // "not-this-host.invalid"): fails hostname verification for localhost.
  std::filesystem::path wrong_host_cert, wrong_host_key;
};

// Writes the files into dir (which must exist). Throws std::runtime_error
// with openssl's output if a step fails.
TestPki make_test_pki(const std::filesystem::path& dir);

}  // namespace edge_outbox::test
