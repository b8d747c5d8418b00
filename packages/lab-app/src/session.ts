/**
 * What the hosted lab does when the gateway says its browser session ended (signed out, idled out,
 * expired: `401` with `X-Ferry-Sign-In`, which only `--auth oidc` sends): it goes to the sign-in
 * page, and comes back to where it was, rather than retrying into a "Server Connection Error".
 */

/** The header naming the sign-in page on a 401 whose cause is an ended session. */
export const SIGN_IN_HEADER = 'X-Ferry-Sign-In';

/**
 * Watch every `fetch` of the page (JupyterLab's server connection uses the global one) for a 401
 * that names the sign-in page; on the first, go there with `next` set to this page.
 */
export function watchSession(win: Window = window): void {
  const original = win.fetch.bind(win);
  let leaving = false;
  win.fetch = async (input, init) => {
    const response = await original(input, init);
    if (response.status === 401 && !leaving) {
      const signIn = response.headers.get(SIGN_IN_HEADER);
      // Only a path of this origin: the header never sends the page elsewhere.
      if (signIn && /^\/(?![/\\])/.test(signIn)) {
        leaving = true;
        const { pathname, search, hash } = win.location;
        win.location.assign(
          `${signIn}?next=${encodeURIComponent(pathname + search + hash)}`
        );
      }
    }
    return response;
  };
}
