import { describe, expect, it } from "vitest";
import { ConflictError, ValidationError } from "../kernel/errors.ts";
import { asDomainError, DbError } from "./db-error.ts";

describe("asDomainError: constraint violations translated once", () => {
  it("unique → 409 with the caller's message and code, defaulting to conflict", () => {
    const dup = new DbError("duplicate key", { code: "23505", constraint: "users_email_key" });
    const named = asDomainError(dup, {
      message: "a user with this email already exists",
      code: "email_taken",
    });
    expect(named).toBeInstanceOf(ConflictError);
    expect(named).toMatchObject({
      status: 409,
      code: "email_taken",
      message: "a user with this email already exists",
    });
    expect(asDomainError(dup)).toMatchObject({ status: 409, code: "conflict" });
  });
  it("foreign key, check and not-null → 422; anything else unchanged", () => {
    expect(asDomainError(new DbError("fk", { code: "23503" }))).toMatchObject({
      status: 422,
      code: "invalid_reference",
    });
    expect(asDomainError(new DbError("chk", { code: "23514", constraint: "c1" }))).toBeInstanceOf(
      ValidationError,
    );
    expect(asDomainError(new DbError("nn", { code: "23502" }))).toMatchObject({ status: 422 });
    const other = new DbError("syntax", { code: "42601" });
    expect(asDomainError(other)).toBe(other);
    const plain = new Error("x");
    expect(asDomainError(plain)).toBe(plain);
  });
});
