use onitb::index::*;
fn main() {
    println!("| material | layouts | states | groups | largest group (states = bytes) |");
    println!("|---|---|---|---|---|");
    for m in Material::all_up_to(5) {
        if m.mover > m.opponent {
            continue;
        }
        let idx = MaterialIndex::new(m);
        let largest = idx.groups().iter().map(|g| g.layouts).max().unwrap();
        println!("| {m} | {} | {} | {} | {} |", idx.layouts(), idx.layouts() * 30, idx.groups().len(), largest * 30);
    }
}
