"""The HTTP application: the Litestar app and its routes, the hot paths for the generation
endpoints, the request guard, the dashboard, the schema page, and uvicorn serving them."""
