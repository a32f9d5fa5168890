import { ERROR_STATUS, type ErrorCode } from '../errors';

export type { ErrorCode };

/** The reason phrase of each status this API answers with. */
export const STATUS_TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** An RFC 9457 problem document for `code`: the one shape every service's errors take. */
export function problemDocument(code: ErrorCode, detail: string) {
  const status = ERROR_STATUS[code];
  return {
    type: `https://docs.mcp-meter.dev/errors/${code}`,
    title: STATUS_TITLES[status] ?? 'Error',
    status,
    detail,
    code,
  };
}
