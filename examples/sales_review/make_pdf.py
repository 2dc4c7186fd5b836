"""Generates sales-notes.pdf, the upload of the `sales_review` example.

Run once, with reportlab installed (outside the repository, e.g. a venv):

    python3 -m venv /tmp/pdf-venv && /tmp/pdf-venv/bin/pip install reportlab
    /tmp/pdf-venv/bin/python examples/sales_review/make_pdf.py

The committed PDF is what the example reads; this script only documents where it came from.
The figures are invented and appear nowhere else in the repository (except the tests that
check the report carries them over).
"""

from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

OUT = Path(__file__).with_name("sales-notes.pdf")

REVENUE = [
    # region, Q1, Q2, Q3, Q4 (thousand EUR)
    ("Nordics", "1284.6", "1397.2", "1451.9", "1602.3"),
    ("DACH", "2118.4", "2046.7", "2233.5", "2391.8"),
    ("Benelux", "746.3", "781.9", "702.4", "688.1"),
    ("Iberia", "512.7", "569.3", "624.8", "671.5"),
]

NOTES = [
    "Koldby Marine (Nordics) renewed for three years; contract value 418,250 EUR.",
    "Vantor Logistics (Benelux) asked for a 12.5% discount at renewal; churn risk high.",
    "Estaleiros Miravento (Iberia) doubled its gateway order after a pilot on two cranes.",
    "Brauerei Hollweck (DACH) delayed its retrofit to 2027; budget frozen by new owner.",
    "Rotterdam depot of Vantor reports 31 sensors offline since the firmware 4.2 update.",
]

PIPELINE = [
    # account, region, stage, value EUR, expected close
    ("Osterfeld Chemie", "DACH", "proposal", "265,400", "2027-Q1"),
    ("Puerto Alcoraz", "Iberia", "negotiation", "193,750", "2027-Q1"),
    ("Havnekraft", "Nordics", "qualified", "88,900", "2027-Q2"),
    ("Van der Meulen Staal", "Benelux", "proposal", "141,300", "2027-Q2"),
    ("Lusitrans Rail", "Iberia", "qualified", "236,800", "2027-Q3"),
]


def header(c, title):
    c.setFont("Helvetica-Bold", 16)
    c.drawString(60, 780, title)
    c.setFont("Helvetica", 10)


def revenue_page(c):
    header(c, "Brightwater Sensors - Sales notes FY2026")
    c.drawString(60, 755, "Internal. Revenue per region and quarter, thousand EUR.")
    y = 720
    c.setFont("Helvetica-Bold", 11)
    c.drawString(60, y, "Region | Q1 | Q2 | Q3 | Q4")
    c.setFont("Helvetica", 11)
    for row in REVENUE:
        y -= 22
        c.drawString(60, y, " | ".join(row))
    c.showPage()


def notes_page(c):
    header(c, "Customer notes")
    y = 750
    for note in NOTES:
        c.drawString(60, y, "- " + note)
        y -= 20
    c.showPage()


def pipeline_page(c):
    header(c, "Pipeline")
    c.drawString(60, 755, "Open deals: account | region | stage | value EUR | expected close")
    y = 730
    for deal in PIPELINE:
        c.drawString(60, y, "Deal: " + " | ".join(deal))
        y -= 20
    c.showPage()


def main():
    c = canvas.Canvas(str(OUT), pagesize=A4, invariant=1)
    c.setTitle("Brightwater Sensors - Sales notes FY2026")
    revenue_page(c)
    notes_page(c)
    pipeline_page(c)
    c.save()


if __name__ == "__main__":
    main()
