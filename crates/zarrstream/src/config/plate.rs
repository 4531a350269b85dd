//! The `plate` section: a high-content screening plate's layout, read into [`Plate`].

use super::*;

/// A plate's layout and the image every field of view is (the `plate` and `image` keys
/// of [`RecordingConfig`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct PlateConfig {
    /// The layout, checked.
    pub plate: Plate,
    /// Level 0 of every field image.
    pub spec: ArraySpec,
    /// The OME settings of every field image.
    pub ome: Ome,
}

/// The `plate` object: the settings of [`Plate`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PlateKeys {
    name: Option<String>,
    rows: NamesKey,
    columns: NamesKey,
    wells: Option<Vec<String>>,
    fields: Option<u32>,
    acquisitions: Option<Vec<AcquisitionKeys>>,
}

/// Rows or columns: their names, or how many (named as [`Plate::grid`] names them).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum NamesKey {
    Count(usize),
    Names(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AcquisitionKeys {
    id: u32,
    name: Option<String>,
    description: Option<String>,
    start_time: Option<u64>,
    end_time: Option<u64>,
}

/// The [`Plate`] a `plate` object describes (the keys of [`RecordingConfig`]'s
/// `plate`), its layout checked: for bindings that need the plate's images before (or
/// without) making the recording.
///
/// ```
/// let plate = zarrstream::config::plate_from_json(r#"{"rows": 2, "columns": 3, "fields": 2}"#)?;
/// assert_eq!(plate.images()?.len(), 12);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plate_from_json(text: &str) -> Result<Plate, ConfigError> {
    serde_json::from_str::<PlateKeys>(text)?.into_plate()
}

impl PlateKeys {
    pub(super) fn into_plate(self) -> Result<Plate, ConfigError> {
        let names = |k: NamesKey, grid: fn(usize) -> Vec<String>| match k {
            NamesKey::Count(n) => grid(n),
            NamesKey::Names(v) => v,
        };
        let rows = names(self.rows, |n| Plate::grid(n, 0).rows().to_vec());
        let columns = names(self.columns, |n| Plate::grid(0, n).columns().to_vec());
        let mut plate = Plate::new(rows, columns);
        if let Some(v) = self.name {
            plate = plate.name(v);
        }
        if let Some(wells) = self.wells {
            let pairs = wells
                .iter()
                .map(|w| match w.split_once('/') {
                    Some((r, c)) if !c.contains('/') => Ok((r.to_string(), c.to_string())),
                    _ => Err(ConfigError::Value {
                        key: "plate.wells",
                        message: format!("{w:?} is not a well path ROW/COLUMN"),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            plate = plate.wells(pairs);
        }
        if let Some(v) = self.fields {
            plate = plate.fields(v);
        }
        if let Some(list) = self.acquisitions {
            plate = plate.acquisitions(list.into_iter().map(|a| {
                let mut acq = Acquisition::new(a.id);
                acq.name = a.name;
                acq.description = a.description;
                acq.start_time = a.start_time;
                acq.end_time = a.end_time;
                acq
            }));
        }
        plate.validate()?;
        Ok(plate)
    }
}
