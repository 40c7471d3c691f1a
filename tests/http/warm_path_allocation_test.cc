// SPDX-License-Identifier: MIT
// The HTTP path of a warm connection allocates nothing per request: a request parsed
// (RequestParser) and framed for the worker (http/forward.h), its response relayed
// (ResponseRelay), once the connection has carried one like it (issue 23 section 4). This binary
// links tests/helpers' counting operator new (AllocationCount); nothing else runs in it.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "http/forward.h"
#include "http/request_parser.h"
#include "http/response_relay.h"
#include "tests/helpers/allocation_counter.h"

namespace bulkhead::http {
namespace {

// A browser's request: long field names and values, a client that forwards for others.
constexpr std::string_view kRequest =
    "GET /catalog/items?page=2&sort=price HTTP/1.1\r\n"
    "Host: catalog.internal.example:8080\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    "Accept-Language: en-GB,en;q=0.5\r\n"
    "Access-Control-Request-Headers: x-requested-with\r\n"
    "X-Forwarded-For: 198.51.100.17\r\n"
    "Connection: keep-alive, X-Private-Hop\r\n"
    "X-Private-Hop: dropped\r\n\r\n";

// A framework's response: long fields, a Connection field naming another.
constexpr std::string_view kResponse =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: application/json; charset=utf-8\r\n"
    "Access-Control-Allow-Origin: https://shop.example.com\r\n"
    "Cache-Control: private, max-age=0, must-revalidate\r\n"
    "Connection: keep-alive, X-Backend-Hop\r\n"
    "X-Backend-Hop: dropped\r\n"
    "Content-Length: 17\r\n\r\n"
    "{\"items\": [1, 2]}";

// One request through the parser, the forwarding and the relay, as a connection carries it.
void OneExchange(RequestParser* parser, ResponseRelay* relay, std::string* to_worker,
                 std::string* to_client) {
  size_t consumed = 0;
  ASSERT_EQ(parser->Parse(kRequest, &consumed), RequestParser::Event::kHead);
  ASSERT_EQ(parser->Parse(kRequest.substr(consumed), &consumed), RequestParser::Event::kMessage);
  to_worker->clear();
  AppendForwardRequest(to_worker, parser->head(), parser->body(),
                       ForwardOptions{.client_address = "203.0.113.200",
                                      .request_id = "5f3a9c1e-000000000001",
                                      .host = "catalog-service-of-the-shop"});
  relay->Begin(/*head_request=*/false, /*client_keep_alive=*/true, /*client_http11=*/true);
  to_client->clear();
  ASSERT_EQ(relay->Feed(kResponse, &consumed, to_client), ResponseRelay::Event::kComplete);
}

TEST(WarmHttpPath, ParsingForwardingAndRelayingAllocateNothing) {
  RequestParser parser(Limits{});
  ResponseRelay relay;
  std::string to_worker;
  std::string to_client;
  OneExchange(&parser, &relay, &to_worker, &to_client);  // the connection's first: it allocates
  OneExchange(&parser, &relay, &to_worker, &to_client);
  EXPECT_NE(to_worker.find("X-Forwarded-For: 198.51.100.17, 203.0.113.200\r\n"), std::string::npos)
      << to_worker;
  EXPECT_EQ(to_worker.find("X-Private-Hop"), std::string::npos) << to_worker;
  EXPECT_EQ(to_client.find("X-Backend-Hop"), std::string::npos) << to_client;

  const size_t before = bulkhead::testing::AllocationCount();
  for (int i = 0; i < 10; ++i) OneExchange(&parser, &relay, &to_worker, &to_client);
  EXPECT_EQ(bulkhead::testing::AllocationCount() - before, 0u)
      << "allocations in 10 warm exchanges";
}

}  // namespace
}  // namespace bulkhead::http
