"""Layer 4, the catalog: the read path (store, read_cache, migrations) and the build path (ingest, build: model files
and sources/ into DuckDB rows, the shipped calibration fitted by recommender.predict.fit)."""

from recommender.catalog.store import Catalog, CatalogWriter, UserCatalog

__all__ = ["Catalog", "CatalogWriter", "UserCatalog"]
