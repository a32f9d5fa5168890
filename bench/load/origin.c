// The latency trials' origin in C (issue 65): an HTTP/1.1 server that answers every request
// with the bench's tools/call result at once.
//
//   origin [PORT]
//
// Listens on 127.0.0.1:PORT (a free port when 0 or absent; printed as {"port":N} on the first
// line of stdout). Each request (a head, then the body its Content-Length names) is answered 200
// with the result the bench's Node origin gives the bench's call (`{"jsonrpc":"2.0","id":1,...}`:
// every scenario the latency trials send is that call, id 1), keep-alive, pipelined requests in
// order. A request it cannot read (no Content-Length on a body-carrying method, chunked, a head
// or body over its buffer) is answered 400 and the connection closed. One thread, one epoll loop,
// nothing allocated per call: its own tail is the machine's, so what a hop adds over it is the
// hop's, where the Node origin's own p99 at the goal's rate (its collector, its event loop) was
// over the goal itself and left the verdict unresolved.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"

#define BUFFER 65536
#define EVENTS 256

static const char BODY[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"3\"}]}}";
static char answer[256];
static size_t answer_length;
static const char REFUSED[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

// A client's connection: the bytes read and not yet answered, and answers not yet written.
struct conn {
  int fd;
  int closing;
  size_t in_length;
  size_t out_start, out_length;
  char in[BUFFER];
  char out[BUFFER];
};

static int loop;

static void finish(struct conn *c) {
  epoll_ctl(loop, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c);
}

// Writes what waits; 0 when the connection ended (or was to end once written).
static int flush(struct conn *c) {
  while (c->out_length > 0) {
    ssize_t n = write(c->fd, c->out + c->out_start, c->out_length);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      return 0;
    }
    c->out_start += (size_t)n;
    c->out_length -= (size_t)n;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  if (c->out_length > 0) ev.events = EPOLLOUT;
  else {
    c->out_start = 0;
    if (c->closing) return 0;
  }
  epoll_ctl(loop, EPOLL_CTL_MOD, c->fd, &ev);
  return 1;
}

static void queue(struct conn *c, const char *bytes, size_t length) {
  if (c->out_start + c->out_length + length > BUFFER) {
    memmove(c->out, c->out + c->out_start, c->out_length);
    c->out_start = 0;
  }
  // Only a refusal can find the buffer full (answers wait for room): the connection ends anyway.
  if (c->out_length + length > BUFFER) return;
  memcpy(c->out + c->out_start + c->out_length, bytes, length);
  c->out_length += length;
}

// The value of header `name` within the head [head, end), or NULL.
static const char *header(const char *head, const char *end, const char *name) {
  size_t n = strlen(name);
  for (const char *line = memchr(head, '\n', (size_t)(end - head)); line != NULL && line + 1 < end;
       line = memchr(line + 1, '\n', (size_t)(end - line - 1))) {
    const char *start = line + 1;
    if ((size_t)(end - start) > n && strncasecmp(start, name, n) == 0 && start[n] == ':') {
      const char *v = start + n + 1;
      while (v < end && (*v == ' ' || *v == '\t')) v++;
      return v;
    }
  }
  return NULL;
}

// Answers every whole request read, as far as there is room for the answers (`*blocked` when
// there was not); 0 when the connection is to close after what is queued.
static int answer_requests(struct conn *c, int *blocked) {
  size_t at = 0;
  while (at < c->in_length) {
    const char *start = c->in + at;
    const char *end = memmem(start, c->in_length - at, "\r\n\r\n", 4);
    if (end == NULL) break;
    end += 4;
    const char *length = header(start, end, "content-length");
    const int has_body = strncmp(start, "GET ", 4) != 0 && strncmp(start, "HEAD ", 5) != 0;
    if (header(start, end, "transfer-encoding") != NULL || (has_body && length == NULL)) {
      queue(c, REFUSED, sizeof REFUSED - 1);
      return 0;
    }
    char *after = NULL;
    unsigned long body = length == NULL ? 0 : strtoul(length, &after, 10);
    size_t whole = (size_t)(end - start) + body;
    if (length != NULL && (after == length || whole > BUFFER)) {
      queue(c, REFUSED, sizeof REFUSED - 1);
      return 0;
    }
    if (at + whole > c->in_length) break;
    // The client has not read the answers before: the rest waits until it has.
    if (c->out_length + answer_length > BUFFER) {
      *blocked = 1;
      break;
    }
    queue(c, answer, answer_length);
    const char *connection = header(start, end, "connection");
    at += whole;
    if (connection != NULL && strncasecmp(connection, "close", 5) == 0) return 0;
  }
  memmove(c->in, c->in + at, c->in_length - at);
  c->in_length -= at;
  // A head that fills the whole buffer without ending is one it cannot read.
  if (c->in_length == BUFFER && !*blocked) {
    queue(c, REFUSED, sizeof REFUSED - 1);
    return 0;
  }
  return 1;
}

// Answers what was read and writes what it can; the connection ends when it is to close.
static void serve(struct conn *c) {
  for (;;) {
    int blocked = 0;
    if (!c->closing && !answer_requests(c, &blocked)) c->closing = 1;
    if (!flush(c)) {
      finish(c);
      return;
    }
    // Done: every whole request answered, or answers wait for the client (flush watches for it).
    if (!blocked || c->out_length > 0) return;
  }
}

static void readable(struct conn *c) {
  ssize_t n = read(c->fd, c->in + c->in_length, BUFFER - c->in_length);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    finish(c);
    return;
  }
  if (n < 0) return;
  c->in_length += (size_t)n;
  serve(c);
}

static void accept_all(int listener) {
  for (;;) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
    if (fd < 0) return;
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL) fail("calloc");
    c->fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(loop, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl");
  }
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 0;
  if (argc > 2 || port < 0 || port > 65535) {
    fprintf(stderr, "usage: origin [PORT]\n");
    return 2;
  }
  answer_length = (size_t)snprintf(answer, sizeof answer,
                                   "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                   "%zu\r\n\r\n%s",
                                   sizeof BODY - 1, BODY);
  signal(SIGPIPE, SIG_IGN);
  // The bench stops the Node origin and starts this one on its port (and back).
  int listener = listen_loopback(port, &loop);
  struct epoll_event events[EVENTS];
  for (;;) {
    int n = epoll_wait(loop, events, EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      if (c == NULL) {
        accept_all(listener);
        continue;
      }
      // Each connection is named by at most one event of a batch (one epoll registration).
      // Once the answers waiting are written, requests read meanwhile are answered.
      if (events[i].events & EPOLLOUT) {
        if (!flush(c)) finish(c);
        else if (c->out_length == 0 && c->in_length > 0) serve(c);
      } else if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        readable(c);
    }
  }
}
