import { connect } from 'node:net';

/** One answer read off a raw connection; status 0 when the server closed without answering. */
export interface RawAnswer {
  status: number;
  head: string;
  body: string;
}

/**
 * Writes `bytes` as they are to 127.0.0.1:`port` and reads one answer (Content-Length or chunked
 * framing, else until the server closes), within `ms`. For requests no HTTP client would send.
 */
export function rawExchange(port: number, bytes: Buffer, ms = 10_000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let received = Buffer.alloc(0);
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = received.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const head = end < 0 ? text : text.slice(0, end);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      let body = end < 0 ? '' : received.subarray(end + 4).toString('utf8');
      if (/\r\ntransfer-encoding: chunked/i.test(head)) body = unchunk(body);
      resolve({ status, head, body });
    };
    const timer = setTimeout(settle, ms);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const text = received.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = text.slice(0, end);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      if (length !== null && received.length >= end + 4 + Number(length[1])) settle();
      else if (/\r\ntransfer-encoding: chunked/i.test(head) && text.endsWith('\r\n0\r\n\r\n')) settle();
    });
    socket.on('error', settle);
    socket.on('close', settle);
  });
}

function unchunk(text: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const eol = text.indexOf('\r\n', at);
    if (eol < 0) return out;
    const size = Number.parseInt(text.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

/** A request head and body as bytes: `target` and header values are written as UTF-8. */
export function rawRequest(
  method: string,
  target: string,
  headers: Array<[string, string]>,
  body = '',
): Buffer {
  const payload = Buffer.from(body, 'utf8');
  const lines = [`${method} ${target} HTTP/1.1`, ...headers.map(([n, v]) => `${n}: ${v}`)];
  if (method !== 'GET' || payload.length > 0) lines.push(`content-length: ${payload.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'utf8'), payload]);
}
