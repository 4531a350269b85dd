//! A plate's field images for Python, from the library (`zarrstream.Plate.images`,
//! `zarrstream.Plate.key`): the same `plate` JSON the recording's config carries, so the
//! order and the keys are the library's own.

use pyo3::prelude::*;
use zarrstream::config::plate_from_json;

use crate::errors::{Failure, guarded};

/// One field image: row, column, field, acquisition id, key.
type Image = (String, String, u32, Option<u32>, String);

/// Every field image of the plate `plate_json` describes, in the recording's order.
#[pyfunction]
pub(crate) fn plate_images(py: Python<'_>, plate_json: &str) -> PyResult<Vec<Image>> {
    guarded("plate_images", || {
        let plate = plate_from_json(plate_json)?;
        let images = plate.images().map_err(zarrstream::Error::from)?;
        Ok(images
            .into_iter()
            .map(|i| (i.row, i.column, i.field, i.acquisition, i.key))
            .collect())
    })
    .map_err(|f: Failure| f.into_pyerr(py))
}

/// The key of one field image of the plate `plate_json` describes.
#[pyfunction]
#[pyo3(signature = (plate_json, row, column, field, acquisition = None))]
pub(crate) fn plate_image_key(
    py: Python<'_>,
    plate_json: &str,
    row: &str,
    column: &str,
    field: u32,
    acquisition: Option<u32>,
) -> PyResult<String> {
    guarded("plate_image_key", || {
        let plate = plate_from_json(plate_json)?;
        Ok(plate
            .image_key(row, column, field, acquisition)
            .map_err(zarrstream::Error::from)?)
    })
    .map_err(|f: Failure| f.into_pyerr(py))
}
