// Where an error nobody can receive goes. It imports only rxjs, so every layer of the library
// (the lanes as much as the batch) reports such errors the one way.
import { config } from 'rxjs';

/**
 * Reports an error nobody can receive (a watcher, a hook or a caller's callback that threw where
 * the library must go on) the way RxJS reports one a subscriber threw: to
 * `config.onUnhandledError` if set, else thrown later, outside the library's work.
 */
export function reportUnhandled(error: unknown): void {
  const handler = config.onUnhandledError;
  if (handler !== null) handler(error);
  else
    setTimeout(() => {
      throw error;
    });
}
