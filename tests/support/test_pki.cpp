// SPDX-License-Identifier: Apache-2.0
#include "support/test_pki.h"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/mosquitto.h"

namespace edge_outbox::test {
namespace {

void openssl(const std::filesystem::path& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  auto log = dir / "openssl.log";
  if (run_command(args, log) != 0) {
    std::ifstream in(log);
    std::ostringstream text;
    text << in.rdbuf();
    throw std::runtime_error("openssl " + args.at(1) + " failed (is openssl installed?):\n" + text.str());
  }
}

void make_ca(const std::filesystem::path& dir, const std::filesystem::path& cert,
             const std::filesystem::path& key, const std::string& name) {
  openssl(dir, {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=" + name,
                "-keyout", key.string(), "-out", cert.string()});
}

void make_signed(const std::filesystem::path& dir, const TestPki& pki, const std::string& stem,
                 const std::string& subject, const std::string& extensions) {
  auto key = dir / (stem + ".key");
  auto csr = dir / (stem + ".csr");
  auto cert = dir / (stem + ".crt");
  auto ext = dir / (stem + ".ext");
  std::ofstream(ext) << extensions;
  openssl(dir, {"req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", key.string(), "-out",
                csr.string()});
  openssl(dir, {"x509", "-req", "-in", csr.string(), "-CA", pki.ca_cert.string(), "-CAkey", pki.ca_key.string(),
                "-CAcreateserial", "-days", "2", "-extfile", ext.string(), "-out", cert.string()});
}

}  // namespace

TestPki make_test_pki(const std::filesystem::path& dir) {
  TestPki pki;
  pki.ca_cert = dir / "ca.crt";
  pki.ca_key = dir / "ca.key";
  make_ca(dir, pki.ca_cert, pki.ca_key, "edge-outbox test CA");
  make_signed(dir, pki, "server", "/CN=localhost",
              "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
              "extendedKeyUsage=serverAuth\n");
  pki.server_cert = dir / "server.crt";
  pki.server_key = dir / "server.key";
  make_signed(dir, pki, "client", "/CN=edge-client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
  pki.client_cert = dir / "client.crt";
  pki.client_key = dir / "client.key";
  make_signed(dir, pki, "wrong-host", "/CN=not-this-host.invalid",
              "basicConstraints=CA:FALSE\nsubjectAltName=DNS:not-this-host.invalid\nextendedKeyUsage=serverAuth\n");
  pki.wrong_host_cert = dir / "wrong-host.crt";
  pki.wrong_host_key = dir / "wrong-host.key";
  pki.other_ca_cert = dir / "other-ca.crt";
  make_ca(dir, pki.other_ca_cert, dir / "other-ca.key", "unrelated CA");
  return pki;
}

}  // namespace edge_outbox::test
