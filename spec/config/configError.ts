// The ConfigError a config's constructor throws, for specs that read its field and message.
import { expect } from 'chai';
import { ConfigError } from '../../lib/errors.js';

export function configErrorOf(make: () => unknown): ConfigError {
  try {
    make();
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError, but nothing was thrown');
}
