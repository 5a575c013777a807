// http_client.h - a small HTTP/1.1 client for the tests: one request per
// connection (Connection: close), the whole answer read to EOF, headers
// lower-cased. Tests only: the server side parses with h2o.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <string>

namespace http_test {

struct Resp {
	int status = 0; // 0: no answer (why in body)
	std::map<std::string, std::string> headers;
	std::string body;
	std::string header(const std::string &n) const
	{
		auto it = headers.find(n);
		return it == headers.end() ? "" : it->second;
	}
};

inline int connect_to(unsigned port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

// Sends raw bytes, reads to EOF (deadline timeout_ms), parses the answer.
inline Resp raw(unsigned port, const std::string &req, unsigned timeout_ms = 30000)
{
	Resp r;
	int fd = connect_to(port);
	if (fd < 0) {
		r.body = "connect failed";
		return r;
	}
	size_t off = 0;
	while (off < req.size()) {
		ssize_t n = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	std::string in;
	char buf[65536];
	for (;;) {
		pollfd p{fd, POLLIN, 0};
		if (poll(&p, 1, (int)timeout_ms) <= 0)
			break;
		ssize_t n = read(fd, buf, sizeof buf);
		if (n <= 0)
			break;
		in.append(buf, (size_t)n);
	}
	close(fd);
	size_t he = in.find("\r\n\r\n");
	if (in.compare(0, 9, "HTTP/1.1 ") || he == std::string::npos) {
		r.body = "no answer: " + in.substr(0, 200);
		return r;
	}
	r.status = atoi(in.c_str() + 9);
	size_t p = in.find("\r\n") + 2;
	while (p < he) {
		size_t e = in.find("\r\n", p);
		std::string line = in.substr(p, e - p);
		size_t c = line.find(':');
		if (c != std::string::npos) {
			std::string k = line.substr(0, c);
			for (char &ch : k)
				ch = (char)tolower((unsigned char)ch);
			size_t v = line.find_first_not_of(' ', c + 1);
			r.headers[k] = v == std::string::npos ? "" : line.substr(v);
		}
		p = e + 2;
	}
	r.body = in.substr(he + 4);
	if (r.header("transfer-encoding") == "chunked")
		r.body = "chunked answers are not expected from shmkv-http";
	return r;
}

inline Resp get(unsigned port, const std::string &target, const std::string &extra = "",
		unsigned timeout_ms = 30000)
{
	return raw(port, "GET " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra + "\r\n",
		   timeout_ms);
}

inline Resp post(unsigned port, const std::string &target, const std::string &body)
{
	return raw(port, "POST " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
				 std::to_string(body.size()) + "\r\n\r\n" + body);
}

// Percent-encodes every byte outside the unreserved set (http/README.md).
inline std::string pct(const std::string &s)
{
	static const char hex[] = "0123456789ABCDEF";
	std::string o;
	for (unsigned char c : s) {
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
			o += (char)c;
		else {
			o += '%';
			o += hex[c >> 4];
			o += hex[c & 15];
		}
	}
	return o;
}

} // namespace http_test
