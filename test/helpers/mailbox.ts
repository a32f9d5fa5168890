import { freePort } from '@mcp-meter/contracts/kit';
import { SMTPServer } from 'smtp-server';

export interface Mail {
  from: string;
  to: string[];
  /** The whole message as received (headers and body). */
  raw: string;
}

/**
 * A real SMTP server (smtp-server, the Nodemailer project's) on a free loopback port: the service
 * under test sends its mail here over TCP exactly as it would to a relay, and tests read what
 * arrived. No TLS and no authentication, as a relay on loopback.
 */
export async function startMailbox(): Promise<{
  url: string;
  mails: Mail[];
  /** Waits for a message to `to` newer than the `after`th, and answers the six-digit code in it. */
  codeFor(to: string, after?: number): Promise<string>;
  /** Waits for a message to `to` newer than the `after`th, and answers its text (quoted-printable undone). */
  textFor(to: string, after?: number): Promise<string>;
  /** How many messages went to `to` so far. */
  countFor(to: string): number;
  /** Refuses the next `count` messages with 451 (a relay that is busy), as a real relay may. */
  refuse(count: number): void;
  close(): Promise<void>;
}> {
  const mails: Mail[] = [];
  let refusing = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (refusing > 0) {
          refusing--;
          callback(Object.assign(new Error('mailbox busy, try again later'), { responseCode: 451 }));
          return;
        }
        mails.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const to = (address: string) => mails.filter((m) => m.to.includes(address.toLowerCase()));
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    countFor: (address) => to(address).length,
    refuse: (count) => {
      refusing = count;
    },
    async textFor(address, after = 0) {
      for (let i = 0; i < 500; i++) {
        const mail = to(address)[after];
        if (mail !== undefined)
          return mail.raw
            .replace(/=\r?\n/g, '')
            .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no mail to ${address}`);
    },
    async codeFor(address, after = 0) {
      for (let i = 0; i < 500; i++) {
        const mail = to(address)[after];
        const code = mail?.raw.match(/^\s+(\d{6})\s*$/m)?.[1];
        if (code !== undefined) return code;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no code mailed to ${address}`);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
