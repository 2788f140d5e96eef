import { hash, verify } from "@node-rs/argon2";

/**
 * Password hashing with argon2id (the @node-rs/argon2 default algorithm; OWASP parameters:
 * 19 MiB memory, 2 iterations). Passwords are never logged or returned.
 */
const OPTIONS = { memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

// A hash of a random string: verifying against it costs the same as a real account, so the
// response time of a sign-in does not reveal whether the email exists.
let dummyHash: Promise<string> | null = null;

export async function verifyPassword(passwordHash: string | null, password: string): Promise<boolean> {
  if (!passwordHash) {
    dummyHash ??= hashPassword(`dummy-${Math.random()}`);
    await verify(await dummyHash, password).catch(() => false);
    return false;
  }
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}
