"""Confluent's error answers: an HTTP status and an `error_code` a client keys on, with a
message a person understands (Confluent's Errors.java names the codes)."""

from __future__ import annotations

from starlette.responses import Response

from registry.media import registry_json

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
SCHEMA_TOO_LARGE = 42209
UNAUTHORIZED = 40101
FORBIDDEN = 40301
UNPROCESSABLE = 422  # a body that is not the JSON object the endpoint takes
STORE_ERROR = 50001


class RegistryError(Exception):
    """An answer other than 200: `status` (HTTP) and `error_code` (Confluent's)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def response(self) -> Response:
        body = {"error_code": self.error_code, "message": self.message}
        return registry_json(body, self.status)


def not_found(code: int, message: str) -> RegistryError:
    return RegistryError(404, code, message)


def unprocessable(code: int, message: str) -> RegistryError:
    return RegistryError(422, code, message)


def subject_not_found(subject: str) -> RegistryError:
    return not_found(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return not_found(VERSION_NOT_FOUND, f"Version {version} not found (subject '{subject}').")


def schema_not_found(what: str = "") -> RegistryError:
    return not_found(SCHEMA_NOT_FOUND, f"Schema {what} not found".replace("  ", " "))


def invalid_schema(why: str) -> RegistryError:
    return unprocessable(INVALID_SCHEMA, f"Invalid schema: {why}")


def not_permitted(why: str) -> RegistryError:
    return unprocessable(OPERATION_NOT_PERMITTED, why)
