"""`/docs` served with the Swagger UI 5 assets that the `fastapi-offline` wheel ships, not from a CDN.

FastAPI's default page loads Swagger UI from jsDelivr; a homelab API (and this project's CI) may have no internet,
and then `/docs` renders blank. (Swagger UI 4 cannot render FastAPI's OpenAPI 3.1, hence version 5.) The assets get
exact public paths so the API-key middleware can stay exact.
"""

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse

DOCS_JS_PATH = "/docs/swagger-ui-bundle.js"
DOCS_CSS_PATH = "/docs/swagger-ui.css"
DOCS_FAVICON_PATH = "/docs/favicon.png"
DOCS_ASSET_PATHS = frozenset({DOCS_JS_PATH, DOCS_CSS_PATH, DOCS_FAVICON_PATH})


def _assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def add_docs_routes(app: FastAPI, title: str) -> None:
    """`/docs`, its OAuth2 redirect page and the two Swagger UI assets (JS, CSS), all offline."""
    assets = _assets_dir()

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{title} - docs",
                                   swagger_js_url=DOCS_JS_PATH, swagger_css_url=DOCS_CSS_PATH,
                                   swagger_favicon_url=DOCS_FAVICON_PATH,
                                   oauth2_redirect_url="/docs/oauth2-redirect")

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(DOCS_JS_PATH, include_in_schema=False)
    def swagger_js() -> FileResponse:
        return FileResponse(assets / "swagger-ui-bundle.js", media_type="text/javascript")

    @app.get(DOCS_CSS_PATH, include_in_schema=False)
    def swagger_css() -> FileResponse:
        return FileResponse(assets / "swagger-ui.css", media_type="text/css")

    @app.get(DOCS_FAVICON_PATH, include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(assets / "favicon.png", media_type="image/png")
