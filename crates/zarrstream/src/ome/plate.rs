//! OME-Zarr 0.5 high-content screening (HCS) plates: the layout of rows, columns, wells,
//! fields of view and acquisitions, its checks, and the `plate` and `well` metadata.
//!
//! A plate is a group tree: the root holds `attributes.ome.plate`, each well is the group
//! `ROW/COLUMN` holding `attributes.ome.well`, and each field of view is an OME-Zarr
//! image at `ROW/COLUMN/FIELD` (its levels at `ROW/COLUMN/FIELD/0`, …). A
//! [`Recording`](crate::Recording) made with
//! [`create_plate`](crate::Recording::create_plate) writes every field image as one of
//! its arrays.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::OME_VERSION;
use crate::error::PlateError;

/// One acquisition of a [`Plate`] (a pass over the plate: a time point, a staining
/// round): its id, which the wells' images refer to, and what NGFF records of it.
///
/// ```
/// use zarrstream::Acquisition;
/// let a = Acquisition::new(0).name("pass 1").start_time(1_700_000_000).end_time(1_700_000_600);
/// assert_eq!(a.id, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Acquisition {
    /// Unique within the plate.
    pub id: u32,
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
    /// Start, in seconds since the Unix epoch (NGFF's `starttime`).
    #[serde(default)]
    pub start_time: Option<u64>,
    /// End, in seconds since the Unix epoch (NGFF's `endtime`); not before the start.
    #[serde(default)]
    pub end_time: Option<u64>,
}

impl Acquisition {
    /// An acquisition with id `id` and nothing else set.
    pub fn new(id: u32) -> Self {
        Acquisition {
            id,
            name: None,
            description: None,
            start_time: None,
            end_time: None,
        }
    }
    /// Sets the name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the description.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// Sets the start time (seconds since the Unix epoch).
    #[must_use]
    pub fn start_time(mut self, seconds: u64) -> Self {
        self.start_time = Some(seconds);
        self
    }
    /// Sets the end time (seconds since the Unix epoch).
    #[must_use]
    pub fn end_time(mut self, seconds: u64) -> Self {
        self.end_time = Some(seconds);
        self
    }

    fn to_json(&self, fields: u32) -> Value {
        let mut a = json!({"id": self.id, "maximumfieldcount": fields});
        let put = |a: &mut Value, k: &str, v: Value| a[k] = v;
        if let Some(v) = &self.name {
            put(&mut a, "name", json!(v));
        }
        if let Some(v) = &self.description {
            put(&mut a, "description", json!(v));
        }
        if let Some(v) = self.start_time {
            put(&mut a, "starttime", json!(v));
        }
        if let Some(v) = self.end_time {
            put(&mut a, "endtime", json!(v));
        }
        a
    }
}

/// One field image of a [`Plate`]: which well, field and acquisition it is, and its key
/// (`ROW/COLUMN/PATH`) in the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlateImage {
    /// The well's row name.
    pub row: String,
    /// The well's column name.
    pub column: String,
    /// The field of view within the well and acquisition, `0..fields`.
    pub field: u32,
    /// The acquisition's id, or `None` for a plate without acquisitions.
    pub acquisition: Option<u32>,
    /// `ROW/COLUMN/PATH`: where the image group is, relative to the plate's root (PATH
    /// numbers the well's images: acquisition index × fields + field).
    pub key: String,
}

/// The layout of an OME-Zarr 0.5 high-content screening plate, as acquire-zarr's HCS
/// settings describe one: named rows and columns, the wells present (every well of the
/// grid unless listed), a number of fields of view per well, optional acquisitions and a
/// name. Pass it to [`Recording::create_plate`](crate::Recording::create_plate), which
/// writes each field of view as an OME-Zarr image.
///
/// Field images are numbered within their well: acquisition `a` (its index in the
/// acquisitions given; 0 without acquisitions), field `f` is the image at path
/// `a × fields + f`. [`images`](Self::images) lists them in the order a screening
/// microscope visits them, which is also the recording's array order: acquisition by
/// acquisition, well by well (in the order given, row-major by default), and within a
/// well its fields one after another.
///
/// ```
/// use zarrstream::{Acquisition, Plate};
/// let plate = Plate::new(["A", "B"], ["1", "2", "3"])
///     .name("screen 7")
///     .fields(2)
///     .acquisitions([Acquisition::new(0), Acquisition::new(1)]);
/// let images = plate.images()?;
/// assert_eq!(images.len(), 2 * 3 * 2 * 2);
/// assert_eq!(images[0].key, "A/1/0");
/// assert_eq!(images[1].key, "A/1/1");
/// assert_eq!(images[2].key, "A/2/0");
/// assert_eq!(plate.image_key("B", "3", 1, Some(1))?, "B/3/3");
/// // A 96-well plate: rows A..H, columns 1..12.
/// assert_eq!(Plate::grid(8, 12).rows()[7], "H");
/// # Ok::<(), zarrstream::PlateError>(())
/// ```
///
/// It is also the `plate` section of a recording's JSON configuration
/// ([`crate::config::RecordingConfig`]): the keys are the setters' names, `rows` and
/// `columns` are lists of names or counts (as [`grid`](Self::grid) names them), `wells`
/// are paths `"ROW/COLUMN"`. Deserializing does not check the layout:
/// [`validate`](Self::validate) does, as [`Recording::create_plate`](crate::Recording::create_plate) does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "plate")]
pub struct Plate {
    /// The plate's name.
    #[serde(default)]
    name: Option<String>,
    /// The row names (`[A-Za-z0-9]+`, unique), or how many (`2` is `["A", "B"]`).
    #[serde(deserialize_with = "crate::de::plate_rows")]
    #[schemars(schema_with = "crate::de::names_schema")]
    rows: Vec<String>,
    /// The column names, or how many (`3` is `["1", "2", "3"]`).
    #[serde(deserialize_with = "crate::de::plate_columns")]
    #[schemars(schema_with = "crate::de::names_schema")]
    columns: Vec<String>,
    /// The wells present, as paths `"ROW/COLUMN"`, in the order they are visited
    /// (default: every well of the grid, row by row).
    #[serde(default, deserialize_with = "crate::de::well_paths")]
    #[schemars(with = "Option<Vec<String>>")]
    wells: Option<Vec<(String, String)>>,
    /// Fields of view per well and acquisition (default 1; 0 is refused).
    #[serde(default = "one")]
    fields: u32,
    /// The acquisitions (default none), each `{"id", "name", "description",
    /// "start_time", "end_time"}` (times in seconds since the Unix epoch).
    #[serde(default)]
    acquisitions: Vec<Acquisition>,
}

/// The default number of fields per well.
fn one() -> u32 {
    1
}

/// Row `i`'s default name: `A`…`Z`, then `AA`, `AB`, … (as plates and spreadsheets
/// name them; a 1536-well plate's 32 rows end at `AF`).
fn row_name(mut i: usize) -> String {
    let mut name = Vec::new();
    loop {
        name.push(b'A' + (i % 26) as u8);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    name.reverse();
    String::from_utf8(name).unwrap_or_default()
}

impl Plate {
    /// A plate with these row and column names (each `[A-Za-z0-9]+`, unique), every
    /// well present, one field per well, no acquisitions.
    pub fn new<R, C>(
        rows: impl IntoIterator<Item = R>,
        columns: impl IntoIterator<Item = C>,
    ) -> Self
    where
        R: Into<String>,
        C: Into<String>,
    {
        Plate {
            name: None,
            rows: rows.into_iter().map(Into::into).collect(),
            columns: columns.into_iter().map(Into::into).collect(),
            wells: None,
            fields: 1,
            acquisitions: Vec::new(),
        }
    }

    /// A plate of `rows` × `columns` wells named the usual way: rows `A`, `B`, …, `Z`,
    /// `AA`, …; columns `1`, `2`, … (`grid(8, 12)` is a 96-well plate).
    pub fn grid(rows: usize, columns: usize) -> Self {
        Plate::new(
            (0..rows).map(row_name),
            (1..=columns).map(|c| c.to_string()),
        )
    }

    /// The plate's name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The wells present, as (row, column) names, in the order they are visited
    /// (default: every well of the grid, row by row).
    #[must_use]
    pub fn wells<R, C>(mut self, wells: impl IntoIterator<Item = (R, C)>) -> Self
    where
        R: Into<String>,
        C: Into<String>,
    {
        self.wells = Some(
            wells
                .into_iter()
                .map(|(r, c)| (r.into(), c.into()))
                .collect(),
        );
        self
    }

    /// Fields of view per well and acquisition (default 1; 0 is refused).
    #[must_use]
    pub fn fields(mut self, n: u32) -> Self {
        self.fields = n;
        self
    }

    /// The acquisitions (default none). With acquisitions, every well has `fields`
    /// images per acquisition, each naming its acquisition.
    #[must_use]
    pub fn acquisitions(mut self, acquisitions: impl IntoIterator<Item = Acquisition>) -> Self {
        self.acquisitions = acquisitions.into_iter().collect();
        self
    }

    /// The row names.
    pub fn rows(&self) -> &[String] {
        &self.rows
    }

    /// The column names.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Fields of view per well and acquisition.
    pub fn field_count(&self) -> u32 {
        self.fields
    }

    /// The acquisitions.
    pub fn acquisition_list(&self) -> &[Acquisition] {
        &self.acquisitions
    }

    /// The wells present, as (row, column), in the order they are visited.
    pub fn well_list(&self) -> Vec<(String, String)> {
        match &self.wells {
            Some(w) => w.clone(),
            None => (self.rows.iter())
                .flat_map(|r| self.columns.iter().map(move |c| (r.clone(), c.clone())))
                .collect(),
        }
    }

    /// Checks the layout: rows, columns and wells present; names alphanumeric and
    /// unique (ignoring case); every well inside the grid and listed once; at least one
    /// field; acquisition ids unique, none ending before it starts.
    pub fn validate(&self) -> Result<(), PlateError> {
        for (axis, names, empty) in [
            ("row", &self.rows, "rows"),
            ("column", &self.columns, "columns"),
        ] {
            if names.is_empty() {
                return Err(PlateError::Empty(empty));
            }
            let mut seen = HashSet::new();
            for name in names {
                let bad = |reason| PlateError::Name {
                    axis,
                    name: name.clone(),
                    reason,
                };
                if name.is_empty() {
                    return Err(bad("empty"));
                }
                if !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(bad("only the letters A-Z, a-z and digits 0-9 are allowed"));
                }
                if !seen.insert(name.to_ascii_lowercase()) {
                    return Err(bad(
                        "given twice (names that differ only in case collide on case-insensitive file systems)",
                    ));
                }
            }
        }
        if self.wells.as_ref().is_some_and(Vec::is_empty) {
            return Err(PlateError::Empty("wells"));
        }
        let mut seen = HashSet::new();
        for (row, column) in self.well_list() {
            let outside = |axis, missing: &String| PlateError::WellOutside {
                row: row.clone(),
                column: column.clone(),
                axis,
                missing: missing.clone(),
            };
            if !self.rows.contains(&row) {
                return Err(outside("row", &row));
            }
            if !self.columns.contains(&column) {
                return Err(outside("column", &column));
            }
            if !seen.insert((row.clone(), column.clone())) {
                return Err(PlateError::DuplicateWell { row, column });
            }
        }
        if self.fields == 0 {
            return Err(PlateError::NoFields);
        }
        let mut ids = HashSet::new();
        for a in &self.acquisitions {
            if !ids.insert(a.id) {
                return Err(PlateError::DuplicateAcquisition(a.id));
            }
            if let (Some(start), Some(end)) = (a.start_time, a.end_time)
                && end < start
            {
                return Err(PlateError::AcquisitionTimes {
                    id: a.id,
                    start,
                    end,
                });
            }
        }
        Ok(())
    }

    /// The acquisitions as the images see them: each one's id, or one `None` pass for
    /// a plate without acquisitions.
    fn passes(&self) -> Vec<Option<u32>> {
        if self.acquisitions.is_empty() {
            vec![None]
        } else {
            self.acquisitions.iter().map(|a| Some(a.id)).collect()
        }
    }

    /// Every field image, in the order a screening microscope visits them (and the
    /// recording's array order): acquisition by acquisition, well by well, and within a
    /// well its fields one after another. Checks the layout first.
    pub fn images(&self) -> Result<Vec<PlateImage>, PlateError> {
        self.validate()?;
        let wells = self.well_list();
        let mut images = Vec::new();
        for (a, acquisition) in self.passes().into_iter().enumerate() {
            for (row, column) in &wells {
                for field in 0..self.fields {
                    let path = a as u64 * u64::from(self.fields) + u64::from(field);
                    images.push(PlateImage {
                        row: row.clone(),
                        column: column.clone(),
                        field,
                        acquisition,
                        key: format!("{row}/{column}/{path}"),
                    });
                }
            }
        }
        Ok(images)
    }

    /// The key of the image of field `field` in well `row`/`column`, of acquisition
    /// `acquisition` (`None` for a plate without acquisitions): what
    /// [`Recording::array`](crate::Recording::array) takes.
    pub fn image_key(
        &self,
        row: &str,
        column: &str,
        field: u32,
        acquisition: Option<u32>,
    ) -> Result<String, PlateError> {
        self.validate()?;
        let missing = |reason| PlateError::NoImage {
            row: row.to_string(),
            column: column.to_string(),
            field,
            acquisition,
            reason,
        };
        if !self
            .well_list()
            .iter()
            .any(|(r, c)| r == row && c == column)
        {
            return Err(missing("no such well"));
        }
        if field >= self.fields {
            return Err(missing("the plate has fewer fields per well"));
        }
        let a = match (acquisition, self.acquisitions.is_empty()) {
            (None, true) => 0,
            (None, false) => return Err(missing("the plate has acquisitions: name one")),
            (Some(_), true) => return Err(missing("the plate has no acquisitions")),
            (Some(id), false) => self
                .acquisitions
                .iter()
                .position(|a| a.id == id)
                .ok_or_else(|| missing("no acquisition has this id"))?,
        };
        let path = a as u64 * u64::from(self.fields) + u64::from(field);
        Ok(format!("{row}/{column}/{path}"))
    }

    /// The root group's `ome` attribute: `{"version": "0.5", "plate": {...}}`.
    pub fn attributes(&self) -> Result<Value, PlateError> {
        self.validate()?;
        let names = |v: &[String]| -> Vec<Value> { v.iter().map(|n| json!({"name": n})).collect() };
        let index = |v: &[String], n: &str| v.iter().position(|x| x == n).unwrap_or(0);
        let wells: Vec<Value> = self
            .well_list()
            .iter()
            .map(|(r, c)| {
                json!({"path": format!("{r}/{c}"), "rowIndex": index(&self.rows, r),
                       "columnIndex": index(&self.columns, c)})
            })
            .collect();
        let passes = self.passes().len() as u64;
        let mut plate = Map::new();
        // NGFF 0.5 moved `version` up to `ome`, but ome-zarr-models' 0.5 plate model
        // still expects it here (and warns without it); ome-zarr writes it too.
        plate.insert("version".into(), json!(OME_VERSION));
        if let Some(n) = &self.name {
            plate.insert("name".into(), json!(n));
        }
        plate.insert("field_count".into(), json!(passes * u64::from(self.fields)));
        plate.insert("rows".into(), Value::Array(names(&self.rows)));
        plate.insert("columns".into(), Value::Array(names(&self.columns)));
        plate.insert("wells".into(), Value::Array(wells));
        if !self.acquisitions.is_empty() {
            let a = self.acquisitions.iter().map(|a| a.to_json(self.fields));
            plate.insert("acquisitions".into(), Value::Array(a.collect()));
        }
        Ok(json!({"version": OME_VERSION, "plate": plate}))
    }

    /// Each well group's key (`ROW/COLUMN`) and its `ome` attribute:
    /// `{"version": "0.5", "well": {"images": [{"path", "acquisition"}, …]}}`.
    pub fn well_attributes(&self) -> Result<Vec<(String, Value)>, PlateError> {
        let images = self.images()?;
        Ok(self
            .well_list()
            .into_iter()
            .map(|(r, c)| {
                let list: Vec<Value> = images
                    .iter()
                    .filter(|i| i.row == r && i.column == c)
                    .map(|i| {
                        let path = i.key.rsplit('/').next().unwrap_or_default();
                        match i.acquisition {
                            Some(a) => json!({"path": path, "acquisition": a}),
                            None => json!({"path": path}),
                        }
                    })
                    .collect();
                let attrs = json!({"version": OME_VERSION, "well": {"images": list}});
                (format!("{r}/{c}"), attrs)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_follow_plates() {
        let names: Vec<String> = (0..28).map(row_name).collect();
        assert_eq!(names[0], "A");
        assert_eq!(names[25], "Z");
        assert_eq!(names[26], "AA");
        assert_eq!(names[27], "AB");
        assert_eq!(row_name(31), "AF");
        assert_eq!(row_name(26 + 26 * 26), "AAA");
        let p = Plate::grid(2, 12);
        assert_eq!(p.rows(), ["A", "B"]);
        assert_eq!(p.columns()[11], "12");
    }

    #[test]
    fn images_visit_each_wells_fields_in_turn() {
        let p = Plate::new(["A", "B"], ["1", "2"])
            .wells([("B", "2"), ("A", "1")])
            .fields(2)
            .acquisitions([Acquisition::new(7), Acquisition::new(3)]);
        let keys: Vec<String> = p.images().unwrap().into_iter().map(|i| i.key).collect();
        assert_eq!(
            keys,
            [
                "B/2/0", "B/2/1", "A/1/0", "A/1/1", "B/2/2", "B/2/3", "A/1/2", "A/1/3"
            ]
        );
        assert_eq!(p.image_key("A", "1", 1, Some(3)).unwrap(), "A/1/3");
        let wells = p.well_attributes().unwrap();
        assert_eq!(wells[0].0, "B/2");
        assert_eq!(
            wells[0].1["well"]["images"],
            json!([{"path": "0", "acquisition": 7}, {"path": "1", "acquisition": 7},
                   {"path": "2", "acquisition": 3}, {"path": "3", "acquisition": 3}])
        );
        let a = p.attributes().unwrap();
        assert_eq!(a["version"], "0.5");
        assert_eq!(a["plate"]["field_count"], 4);
        assert_eq!(
            a["plate"]["wells"][0],
            json!({"path": "B/2", "rowIndex": 1, "columnIndex": 1})
        );
        assert_eq!(
            a["plate"]["acquisitions"][1],
            json!({"id": 3, "maximumfieldcount": 2})
        );
    }

    #[test]
    fn bad_layouts_name_the_problem() {
        let base = || Plate::new(["A", "B"], ["1", "2"]);
        let cases = [
            (
                base().wells([("C", "1")]),
                PlateError::WellOutside {
                    row: "C".into(),
                    column: "1".into(),
                    axis: "row",
                    missing: "C".into(),
                },
            ),
            (
                base().wells([("A", "3")]),
                PlateError::WellOutside {
                    row: "A".into(),
                    column: "3".into(),
                    axis: "column",
                    missing: "3".into(),
                },
            ),
            (base().fields(0), PlateError::NoFields),
            (
                base().wells([("A", "1"), ("A", "1")]),
                PlateError::DuplicateWell {
                    row: "A".into(),
                    column: "1".into(),
                },
            ),
            (
                Plate::new(["A", "a"], ["1"]),
                PlateError::Name {
                    axis: "row",
                    name: "a".into(),
                    reason: "given twice (names that differ only in case collide on case-insensitive file systems)",
                },
            ),
            (
                Plate::new(["A"], ["1/2"]),
                PlateError::Name {
                    axis: "column",
                    name: "1/2".into(),
                    reason: "only the letters A-Z, a-z and digits 0-9 are allowed",
                },
            ),
            (Plate::grid(0, 3), PlateError::Empty("rows")),
            (
                base().wells(Vec::<(String, String)>::new()),
                PlateError::Empty("wells"),
            ),
            (
                base().acquisitions([Acquisition::new(1), Acquisition::new(1)]),
                PlateError::DuplicateAcquisition(1),
            ),
            (
                base().acquisitions([Acquisition::new(1).start_time(10).end_time(5)]),
                PlateError::AcquisitionTimes {
                    id: 1,
                    start: 10,
                    end: 5,
                },
            ),
        ];
        for (plate, want) in cases {
            assert_eq!(plate.images().unwrap_err(), want);
            assert_eq!(plate.attributes().unwrap_err(), want);
        }
        let e = base().wells([("A", "3")]).validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "well A/3 is outside the plate: it has no column \"3\""
        );
        let p = base().fields(2);
        assert!(matches!(
            p.image_key("A", "1", 2, None),
            Err(PlateError::NoImage { field: 2, .. })
        ));
        assert!(p.image_key("A", "1", 0, Some(0)).is_err());
        let e = base().wells([("A", "1")]).image_key("B", "2", 0, None);
        assert_eq!(
            e.unwrap_err().to_string(),
            "the plate has no field image B/2 field 0: no such well"
        );
    }
}
