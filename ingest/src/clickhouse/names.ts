/** A ClickHouse database name this service accepts (also in settings read before any client is made). */
export const DATABASE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
