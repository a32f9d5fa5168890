import type { Logger } from '@mcp-meter/contracts/kit';
import nodemailer, { type Transporter } from 'nodemailer';

/** One plain-text message to one person. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

/** Sends the service's own mail (sign-in codes). Throws when the message was not accepted. */
export interface Mailer {
  send(message: MailMessage): Promise<void>;
  close(): void;
}

/** SMTP_URL's transport (nodemailer): `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://…:465`. */
export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;

  constructor(
    url: string,
    private readonly from: string,
  ) {
    // A message is sent while someone waits on a page: fail in seconds, not minutes.
    this.transport = nodemailer.createTransport({
      url,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 15_000,
    });
  }

  async send(message: MailMessage): Promise<void> {
    await this.transport.sendMail({ from: this.from, ...message });
  }

  close(): void {
    this.transport.close();
  }
}

/**
 * Without SMTP_URL (development, `npm start`): the message is written to the log instead, so a
 * developer reads the code there. Never used when SMTP_URL is set.
 */
export class LogMailer implements Mailer {
  constructor(private readonly logger: Logger) {}

  async send(message: MailMessage): Promise<void> {
    this.logger.warn(
      { to: message.to, subject: message.subject, text: message.text },
      'mail not sent (SMTP_URL is unset): logged instead',
    );
  }

  close(): void {}
}
