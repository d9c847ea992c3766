// SPDX-License-Identifier: Apache-2.0
#include "host/read_secret.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace edge_outbox::host {

std::string read_secret(const std::string& file, const std::string& env, const std::string& what) {
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + what + " " + file + ": check that it exists and is readable");
    std::ostringstream text;
    text << in.rdbuf();
    std::string secret = text.str();
    if (!secret.empty() && secret.back() == '\n') secret.pop_back();
    if (!secret.empty() && secret.back() == '\r') secret.pop_back();
    if (secret.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
      throw std::runtime_error(what + " " + file +
                               " holds more than one line or a NUL byte: write the secret alone on one line");
    }
    return secret;
  }
  if (!env.empty()) {
    const char* value = std::getenv(env.c_str());
    if (!value) throw std::runtime_error(what + " " + env + " is not set: export it or drop the option");
    return value;
  }
  return {};
}

}  // namespace edge_outbox::host
