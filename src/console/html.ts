/**
 * The console's markup: every text goes through {@link esc} (or {@link html}'s interpolation),
 * so nothing an operation, a trail or a request holds is ever read as markup.
 */

/** A piece of markup already escaped: {@link html} inserts it as it is. */
export class Markup {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Text for an element's content or a quoted attribute value: `& < > " ' \`` escaped. */
export function esc(value: unknown): string {
  const text = value === null || value === undefined ? '' : value instanceof Date ? value.toISOString() : String(value);
  return text.replace(/[&<>"'`]/g, (c) => ENTITIES[c] as string);
}

type Part = Markup | string | number | boolean | null | undefined | Date | readonly Part[];

function part(value: Part): string {
  if (value instanceof Markup) return value.text;
  if (Array.isArray(value)) return value.map(part).join('');
  if (value === null || value === undefined || value === false) return '';
  return esc(value);
}

/**
 * A template tag: the literal parts are markup, every interpolated value is escaped unless it is
 * a {@link Markup} (or an array of them).
 *
 * @example
 * html`<td>${record.key}</td>`   // the key escaped
 */
export function html(strings: TemplateStringsArray, ...values: Part[]): Markup {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += part(v) + (strings[i + 1] ?? '');
  });
  return new Markup(out);
}

/** The console's style: system fonts, AA contrast (≥ 4.5:1), visible focus, a single column on a phone. */
const STYLE = `
:root{color-scheme:light;--fg:#1a1a1a;--muted:#4a4a4a;--line:#c8c8c8;--accent:#0b57d0;--warn:#8a3c00;--bad:#a4161a;--ok:#1b5e20}
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#fff}
header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;border-bottom:1px solid var(--line);background:#f4f6f8}
header a{color:var(--accent)}main{padding:1rem;max-width:72rem;margin:0 auto}
h1{font-size:1.4rem;margin:.2rem 0 1rem}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}h3{font-size:1rem;margin:1rem 0 .3rem}
a{color:var(--accent)}a:focus,button:focus,input:focus,textarea:focus,select:focus{outline:3px solid #f0a500;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:1rem;background:#fff;padding:.3rem}
table{border-collapse:collapse;width:100%;margin:.3rem 0 1rem}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;background:#f4f6f8}td code,dd code{word-break:break-all}
.counts{display:flex;flex-wrap:wrap;gap:.6rem;padding:0;list-style:none}.counts li{border:1px solid var(--line);border-radius:.4rem;padding:.4rem .7rem}
.counts strong{font-size:1.3rem;display:block}
.status{font-weight:600}.status-unknown,.status-failed{color:var(--bad)}.status-locked,.status-pending{color:var(--warn)}.status-completed,.status-approved{color:var(--ok)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{font-weight:600;color:var(--muted)}dd{margin:0;word-break:break-word}
form.action{border:1px solid var(--line);border-radius:.4rem;padding:.7rem;margin:.6rem 0}
label{display:block;font-weight:600;margin:.3rem 0 .15rem}input[type=text],input[type=password],input[type=search],textarea{width:100%;max-width:40rem;font:inherit;padding:.4rem;border:1px solid #767676;border-radius:.25rem}
button{font:inherit;padding:.45rem .9rem;border-radius:.3rem;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer;margin:.4rem .4rem 0 0}
button.secondary{background:#fff;color:var(--accent)}button.danger{background:var(--bad);border-color:var(--bad)}
.flash{border-left:4px solid var(--ok);background:#eef6ee;padding:.5rem .8rem}.error{border-left:4px solid var(--bad);background:#fbeeee;padding:.5rem .8rem}
.muted{color:var(--muted)}.sealed{font-family:ui-monospace,monospace;background:#f4f4f4;padding:0 .2rem}
pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:.5rem}
@media (max-width:40rem){table,thead,tbody,tr,th,td{display:block}thead{position:absolute;left:-999px}tr{border-bottom:2px solid var(--line);padding:.3rem 0}td{border:0;padding:.15rem .3rem}
td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:var(--muted)}dl{grid-template-columns:1fr}}
`;

export type PageOptions = {
  title: string;
  /** The operator signed in (absent on the login page). */
  actor?: string;
  /** Where the console is mounted, e.g. `/console`. */
  base: string;
  /** The session's anti-forgery token, for the sign-out form. */
  csrf?: string;
  flash?: string;
  error?: string;
};

/** A whole page: language, viewport, skip link, header with search and sign-out, main. */
export function page(o: PageOptions, body: Markup): string {
  const header = o.actor
    ? html`<header><a href="${o.base}">Inbox</a>
<form role="search" method="get" action="${o.base}/search"><label for="q" class="skip">Search</label>
<input id="q" type="search" name="q" placeholder="task id, operation key or job id" aria-label="Search by task id, operation key or job id">
<button type="submit" class="secondary">Search</button></form>
<span>Signed in as <strong>${o.actor}</strong></span>
<form method="post" action="${o.base}/logout"><input type="hidden" name="_csrf" value="${o.csrf}"><button type="submit" class="secondary">Sign out</button></form></header>`
    : html``;
  return `<!doctype html>${html`<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${o.title} · bullmq-idempotency console</title><style>${new Markup(STYLE)}</style></head>
<body><a class="skip" href="#main">Skip to content</a>${header}
<main id="main"><h1>${o.title}</h1>
${o.flash ? html`<p class="flash" role="status">${o.flash}</p>` : ''}
${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ''}
${body}</main></body></html>`}`;
}

/** A time as the database gave it (ISO, UTC) in a `<time>` element. */
export function time(at: Date | string | null | undefined): Markup {
  if (at === null || at === undefined) return html`<span class="muted">—</span>`;
  const iso = at instanceof Date ? at.toISOString() : at;
  return html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>`;
}

/** A link to the page of one operation (its key in the query: a key is no secret, as in the trail). */
export function operationLink(base: string, key: string, label: string = key): Markup {
  return html`<a href="${base}/operation?key=${encodeURIComponent(key)}"><code>${label}</code></a>`;
}

/** `1h 2m`, `35s`: how long until (positive) or since (negative) a moment. */
export function span(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}
