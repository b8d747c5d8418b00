/**
 * Ferry's favicon, idle and busy (JupyterLab swaps the two `favicon` links of its page while a
 * kernel runs), as small SVGs that follow no theme: a hull on the water, the busy one with a dot.
 */

const HULL =
  '<path d="M6 19h20l-3.5 6h-13z" fill="#1565c0"/>' +
  '<path d="M15 5v13h-7z" fill="#ef6c00"/><path d="M17 8v10h6z" fill="#90caf9"/>' +
  '<path d="M3 27c3 0 3-1.5 6.5-1.5S13 27 16 27s3-1.5 6.5-1.5S26 27 29 27" stroke="#1565c0" stroke-width="1.6" fill="none" stroke-linecap="round"/>';

const svg = (extra: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">${HULL}${extra}</svg>\n`;

/** The favicons by file name, as `/static/favicons/` serves them. */
export const FAVICONS: Readonly<Record<string, string>> = {
  'favicon.svg': svg(''),
  'favicon-busy.svg': svg('<circle cx="26" cy="7" r="5" fill="#ef6c00"/>')
};
