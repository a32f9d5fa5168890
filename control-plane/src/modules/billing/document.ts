// pdfkit is loaded on the first PDF, not at start: it is a fifth of a second of every start.
import { addressLines, taxIdLabel } from '../../billing-details';
import { brandStyle, escapeHtml } from '../../http/html';
import { formatMoney } from '../checkout/page';
import type { Invoice } from './schemas';

/** What an invoice's hosted page and PDF show: the invoice, and who issued it to whom. */
export interface InvoiceDocument {
  invoice: Invoice;
  /** The provider's brand as it is now; who issued the invoice in law is `invoice.issuer`. */
  merchant: {
    displayName: string;
    supportEmail: string | null;
    logoUrl: string | null;
    brandColor: string | null;
  };
  pdfUrl: string;
  sandbox: boolean;
}

/**
 * A unit price in the currency's major unit, exactly: "0.2" cents of usd is "$0.002". The
 * decimal is shifted as text, never through a float, so 12 decimal places survive.
 */
export function formatUnitAmount(unitAmount: string, currency: string): string {
  const digits =
    new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  const [whole = '0', fraction = ''] = unitAmount.split('.');
  const padded = whole.padStart(digits + 1, '0');
  const major = padded.slice(0, padded.length - digits).replace(/^0+(?=\d)/, '');
  const minor = `${padded.slice(padded.length - digits)}${fraction}`.replace(/0+$/, '');
  const symbol = formatMoney(0, currency).replace(/[\d.,\s]/g, '');
  const decimals = minor.length < digits ? minor.padEnd(digits, '0') : minor;
  return `${symbol}${major}${decimals === '' ? '' : `.${decimals}`}`;
}

const day = (iso: string | null) => (iso === null ? '' : iso.slice(0, 10));

/**
 * The lines that name the issuer under its brand: legal name, postal address, company number and
 * tax numbers, as they stood when the invoice was finalized.
 */
export function issuerLines(inv: Invoice): string[] {
  const { issuer } = inv;
  return [
    issuer.legalName,
    ...addressLines(issuer.address),
    issuer.companyNumber === null ? null : `Company number ${issuer.companyNumber}`,
    issuer.vatNumber === null ? null : `VAT ${issuer.vatNumber}`,
    issuer.taxId === null ? null : `Tax ID ${issuer.taxId}`,
  ].filter((line): line is string => line !== null);
}

/** The lines that name whom the invoice is to: name (or email, or reference), email, address, tax ids. */
export function billedToLines(inv: Invoice): string[] {
  const first = inv.customerName ?? inv.customerEmail ?? inv.customerRef;
  return [
    first,
    inv.customerEmail !== null && inv.customerEmail !== first ? inv.customerEmail : null,
    ...addressLines(inv.customerAddress),
    ...inv.customerTaxIds.map((taxId) => `${taxIdLabel(taxId.type)} ${taxId.value}`),
  ].filter((line): line is string => line !== null);
}

const STATUS_WORDS: Record<Invoice['status'], string> = {
  draft: 'Draft',
  open: 'Due',
  paid: 'Paid',
  uncollectible: 'Unpaid',
  void: 'Void',
};

export const INVOICE_CSP =
  "default-src 'none'; img-src https:; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'";

/** Lines of text as one block of HTML, each escaped. */
const lines = (texts: string[]) => texts.map((text) => escapeHtml(text)).join('<br>');

/** The hosted invoice page: server-rendered, every value escaped, no scripts, no third-party assets. */
export function renderInvoicePage(doc: InvoiceDocument): string {
  const { invoice: inv, merchant } = doc;
  const money = (amount: number) => escapeHtml(formatMoney(amount, inv.currency));
  const rows = inv.lines
    .map(
      (line) =>
        `<tr><td>${escapeHtml(line.description)}${
          line.period === null
            ? ''
            : `<div class="muted">${day(line.period.start)} – ${day(line.period.end)}</div>`
        }</td><td class="n">${line.quantity}</td><td class="n">${escapeHtml(
          formatUnitAmount(line.unitAmount, inv.currency),
        )}</td><td class="n">${money(line.amount)}</td></tr>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Invoice ${escapeHtml(inv.id)} from ${escapeHtml(merchant.displayName)}</title>
<style>
${brandStyle(merchant.brandColor)}
body{font-family:system-ui,sans-serif;background:#f5f6f8;margin:0;display:flex;justify-content:center}
main{background:#fff;border-top:6px solid var(--brand);max-width:720px;width:100%;margin:40px 16px;padding:32px;border-radius:12px;box-shadow:0 2px 12px #0001}
h1{font-size:20px;margin:0 0 4px}.muted{color:#777;font-size:13px}table{width:100%;border-collapse:collapse;margin:24px 0}
th,td{text-align:left;padding:8px 6px;border-bottom:1px solid #eee;vertical-align:top}.n{text-align:right;white-space:nowrap}
.total td{font-weight:600;border-bottom:0}.status{display:inline-block;padding:2px 10px;border-radius:10px;background:#eef;font-size:13px}
.sandbox{background:#fff4cc;padding:6px 10px;border-radius:6px;font-size:12px;margin-bottom:12px}a.pdf{display:inline-block;margin-top:8px;color:var(--brand-text)}
header{display:flex;align-items:center;gap:12px}header img{max-height:40px;max-width:160px}
.parties{display:flex;flex-wrap:wrap;gap:24px;margin:16px 0}.parties>div{flex:1;min-width:200px}.parties h2{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#555;margin:0 0 4px}
</style></head>
<body><main>
${doc.sandbox ? '<div class="sandbox">Sandbox invoice: no real money moved.</div>' : ''}
<header>${merchant.logoUrl?.startsWith('https://') ? `<img src="${escapeHtml(merchant.logoUrl)}" alt="">` : ''}<h1>${escapeHtml(merchant.displayName)}</h1></header>
<p>Invoice <strong>${escapeHtml(inv.id)}</strong> <span class="status">${STATUS_WORDS[inv.status]}</span><br>
<span class="muted">Issued ${day(inv.finalizedAt ?? inv.createdAt)}${inv.paidAt === null ? '' : ` · paid ${day(inv.paidAt)}`}</span></p>
<div class="parties"><div><h2>From</h2>${lines([
    ...issuerLines(inv),
    ...(merchant.supportEmail === null ? [] : [merchant.supportEmail]),
  ])}</div><div><h2>Billed to</h2>${lines(billedToLines(inv))}</div></div>
<table><thead><tr><th>Description</th><th class="n">Qty</th><th class="n">Unit price</th><th class="n">Amount</th></tr></thead>
<tbody>
${rows}
<tr class="total"><td colspan="3">Total</td><td class="n">${money(inv.total)}</td></tr>
<tr><td colspan="3">Amount paid</td><td class="n">${money(inv.amountPaid)}</td></tr>
<tr><td colspan="3">Amount due</td><td class="n">${money(inv.amountDue)}</td></tr>
</tbody></table>
<a class="pdf" href="${escapeHtml(doc.pdfUrl)}">Download PDF</a>
</main></body></html>`;
}

/** The same invoice as a one-document PDF (pdfkit, its built-in Helvetica: nothing fetched). */
export async function renderInvoicePdf(doc: InvoiceDocument): Promise<Buffer> {
  const { default: PDFDocument } = await import('pdfkit');
  const { invoice: inv, merchant } = doc;
  const money = (amount: number) => formatMoney(amount, inv.currency);
  const pdf = new PDFDocument({
    size: 'A4',
    margin: 50,
    info: { Title: `Invoice ${inv.id}`, Author: merchant.displayName, Subject: `Invoice ${inv.id}` },
  });
  const chunks: Buffer[] = [];
  pdf.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<Buffer>((resolve, reject) => {
    pdf.on('end', () => resolve(Buffer.concat(chunks)));
    pdf.on('error', reject);
  });
  // The standard fonts speak WinAnsi only: anything else becomes '?', never a broken file.
  const text = (value: string) => value.replace(/[^\x20-\x7e\u00a0-\u00ff€–]/gu, '?');

  if (doc.sandbox)
    pdf.fontSize(9).fillColor('#8a6d00').text('Sandbox invoice: no real money moved.').moveDown(0.5);
  pdf.fillColor('#000').fontSize(18).font('Helvetica-Bold').text(text(merchant.displayName));
  pdf.moveDown(0.5).fillColor('#000').fontSize(12).text(`Invoice ${inv.id} - ${STATUS_WORDS[inv.status]}`);
  pdf
    .fontSize(10)
    .text(
      `Issued ${day(inv.finalizedAt ?? inv.createdAt)}${inv.paidAt === null ? '' : `, paid ${day(inv.paidAt)}`}`,
    );
  pdf.moveDown();
  // The two parties side by side: the issuer on the left, the customer on the right.
  const top = pdf.y;
  const party = (x: number, title: string, texts: string[]) => {
    pdf.font('Helvetica-Bold').fontSize(9).fillColor('#555').text(title, x, top, { width: 240 });
    pdf.font('Helvetica').fontSize(10).fillColor('#000');
    for (const line of texts) pdf.text(text(line), x, pdf.y, { width: 240 });
    return pdf.y;
  };
  const fromEnd = party(50, 'FROM', [
    ...issuerLines(inv),
    ...(merchant.supportEmail === null ? [] : [merchant.supportEmail]),
  ]);
  const toEnd = party(305, 'BILLED TO', billedToLines(inv));
  pdf.x = 50;
  pdf.y = Math.max(fromEnd, toEnd);
  pdf.moveDown();

  const columns = [50, 330, 380, 470];
  const header = (y: number) => {
    pdf.font('Helvetica-Bold');
    pdf.text('Description', columns[0], y, { width: 270 });
    pdf.text('Qty', columns[1], y, { width: 45, align: 'right' });
    pdf.text('Unit price', columns[2], y, { width: 85, align: 'right' });
    pdf.text('Amount', columns[3], y, { width: 75, align: 'right' });
    pdf.font('Helvetica');
  };
  header(pdf.y);
  pdf.moveDown(0.5);
  for (const line of inv.lines) {
    if (pdf.y > 740) {
      pdf.addPage();
      header(pdf.y);
      pdf.moveDown(0.5);
    }
    const y = pdf.y;
    const description = `${line.description}${line.period === null ? '' : ` (${day(line.period.start)} – ${day(line.period.end)})`}`;
    pdf.text(text(description), columns[0], y, { width: 270 });
    const after = pdf.y;
    pdf.text(String(line.quantity), columns[1], y, { width: 45, align: 'right' });
    pdf.text(text(formatUnitAmount(line.unitAmount, inv.currency)), columns[2], y, {
      width: 85,
      align: 'right',
    });
    pdf.text(text(money(line.amount)), columns[3], y, { width: 75, align: 'right' });
    pdf.y = Math.max(after, pdf.y) + 4;
  }
  pdf.moveDown();
  for (const [label, amount] of [
    ['Total', inv.total],
    ['Amount paid', inv.amountPaid],
    ['Amount due', inv.amountDue],
  ] as const) {
    const y = pdf.y;
    pdf
      .font(label === 'Total' ? 'Helvetica-Bold' : 'Helvetica')
      .text(label, columns[2], y, { width: 85, align: 'right' });
    pdf.text(text(money(amount)), columns[3], y, { width: 75, align: 'right' });
  }
  pdf.end();
  return done;
}
