import type { Logger } from '@mcp-meter/contracts/kit';
import type { Transporter } from 'nodemailer';

/** One plain-text message to one person. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

/** Sends the service's own mail (sign-in codes). Throws when the message was not accepted. */
export interface Mailer {
  /** Whether a message sent leaves the service; false when it is only written to the log. */
  readonly delivers: boolean;
  send(message: MailMessage): Promise<void>;
  close(): void;
}

/** SMTP_URL's transport (nodemailer): `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://…:465`. */
export class SmtpMailer implements Mailer {
  readonly delivers = true;
  /** Made on the first message: nodemailer is loaded then, not at every start. */
  private transport: Promise<Transporter> | undefined;

  constructor(
    private readonly url: string,
    private readonly from: string,
  ) {}

  private transporter(): Promise<Transporter> {
    this.transport ??= import('nodemailer').then(({ default: nodemailer }) =>
      // A message is sent while someone waits on a page: fail in seconds, not minutes.
      nodemailer.createTransport({
        url: this.url,
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 15_000,
      }),
    );
    return this.transport;
  }

  async send(message: MailMessage): Promise<void> {
    await (await this.transporter()).sendMail({ from: this.from, ...message });
  }

  close(): void {
    void this.transport?.then((transport) => transport.close());
  }
}

/**
 * Without SMTP_URL, mail cannot be sent. With MAIL_TO_LOG on (a development setting, on by default
 * only for `npm start` on embedded defaults) the message is written to the log instead, so a
 * developer reads the code there; otherwise the send fails (the person asking is told the code
 * could not be sent) and the log says which setting is missing, never what the message held.
 */
export class LogMailer implements Mailer {
  readonly delivers = false;
  constructor(
    private readonly logger: Logger,
    private readonly toLog: boolean,
  ) {}

  async send(message: MailMessage): Promise<void> {
    if (!this.toLog) {
      this.logger.error(
        'mail not sent: SMTP_URL is unset (MAIL_TO_LOG=true writes mail to the log, for development only)',
      );
      throw new Error('SMTP_URL is unset');
    }
    this.logger.warn(
      { to: message.to, subject: message.subject, text: message.text },
      'mail not sent (SMTP_URL is unset): logged instead (MAIL_TO_LOG)',
    );
  }

  close(): void {}
}
